#!/usr/bin/env bash
# ctest python_mypy (docs/python.md, "Type checking"): mypy, pinned in python/requirements-tools.txt,
# passes on examples/python/*.py against the package in the checkout (python/loom: its .py files
# and the committed stubs of _core), with pyproject.toml's [tool.mypy] settings; and it reports
# every error of tests/python/mypy_negative.py, the control that the stubs are read at all.
#   tests/python/mypy_check.sh SOURCE_DIR TOOLS_VENV CACHE_DIR
set -euo pipefail
src=${1:?usage: mypy_check.sh SOURCE_DIR TOOLS_VENV CACHE_DIR}
tools=${2:?usage: mypy_check.sh SOURCE_DIR TOOLS_VENV CACHE_DIR}
cache=${3:?usage: mypy_check.sh SOURCE_DIR TOOLS_VENV CACHE_DIR}
[ -x "$tools/bin/python" ] || {
  echo "mypy_check: no venv at $tools: run scripts/setup.sh (scripts/test_venv.sh pytools python/requirements-tools.txt)"
  exit 1
}
mypy() {
  MYPYPATH=$src/python "$tools/bin/python" -m mypy --config-file "$src/pyproject.toml" --cache-dir "$cache" "$@"
}
mypy "$src"/examples/python/*.py
expected=$(grep -c '# expect:' "$src/tests/python/mypy_negative.py")
if out=$(mypy "$src/tests/python/mypy_negative.py"); then
  echo "mypy_check: mypy passed tests/python/mypy_negative.py, which has $expected errors: it does not read the stubs"
  exit 1
fi
found=$(grep -c ': error:' <<< "$out" || true)
if [ "$found" != "$expected" ]; then
  echo "mypy_check: $found errors in tests/python/mypy_negative.py, expected $expected (one per '# expect:' line):"
  echo "$out"
  exit 1
fi
echo "mypy_check: the examples pass; the $expected errors of the control are found"
