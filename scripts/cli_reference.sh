#!/usr/bin/env bash
# Rewrites the table of commands in docs/cli.md (between its "reference: begin" and "reference:
# end" markers) from the `loom` command line's own tables: `loom help --markdown`. Run it after
# adding or changing a verb; cli_test's Cli.DocsReferenceIsTheHelp fails until then.
#   scripts/cli_reference.sh [BUILD_DIR]     (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
python3 - "$build/tools/cli/loom" "$root/docs/cli.md" <<'PY'
import subprocess
import sys

loom, doc = sys.argv[1:]
table = subprocess.run([loom, "help", "--markdown"], check=True, capture_output=True, text=True).stdout
text = open(doc, encoding="utf-8").read()
b = text.index("\n", text.index("<!-- reference: begin")) + 1
e = text.index("<!-- reference: end")
with open(doc, "w", encoding="utf-8") as f:
    f.write(text[:b] + table + text[e:])
print(f"{doc}: {table.count(chr(10)) - 2} commands")
PY
