#!/usr/bin/env python3
"""Compiles the ```cpp blocks of the given Markdown files marked `<!-- snippet: internal -->`:
examples of Loom's own code (a verb of the command line, in docs/contributing.md), which a
program built against the installed package cannot include. Each block is a whole file, checked
with the compiler's -fsyntax-only against the source tree (include/, src/, tools/cli/), so that
an example that no longer compiles fails the suite (docs/testing.md, "Docs that compile").

    check_internal_snippets.py CXX SOURCE_DIR file.md [file.md ...]
"""
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from extract_snippets import blocks  # noqa: E402


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    cxx, root = sys.argv[1], pathlib.Path(sys.argv[2])
    includes = [f"-I{root / d}" for d in ("include", "src", "tools/cli")]
    checked, failed = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[3:]:
            path = pathlib.Path(name)
            for line, code, d in blocks(path):
                if not d["internal"]:
                    continue
                checked += 1
                src = pathlib.Path(tmp) / f"internal_{checked}.cpp"
                src.write_text(f'#line {line + 1} "{path}"\n{code}\n', encoding="utf-8")
                r = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Wall", *includes, str(src)],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    failed += 1
                    print(f"{path}:{line}: does not compile\n{r.stderr}")
    if checked == 0:
        print("no internal snippets found")
        return 1
    print(f"internal snippets: {checked - failed} compiled, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
