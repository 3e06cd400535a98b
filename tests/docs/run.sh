#!/usr/bin/env bash
# Every C++ block of README.md and docs/*.md, compiled against the installed package (and run
# where the block is marked so): a snippet cannot drift from the API (docs/testing.md).
set -euo pipefail
build_dir="$1"; source_dir="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
python3 "$source_dir/tests/docs/extract_snippets.py" "$work/snippets" "$source_dir/README.md" "$source_dir"/docs/*.md
cmake -S "$source_dir/tests/docs" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DSNIPPET_DIR="$work/snippets" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build"
export LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}"
"$work/build/snippets"
for p in "$work"/build/program_*; do
  [[ -x $p ]] || continue
  echo "running $(basename "$p")"
  "$p"
done
