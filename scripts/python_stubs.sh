#!/usr/bin/env bash
# The type stubs of the Python module's native half (docs/python.md, "Type stubs"): nanobind's own
# generator (python -m nanobind.stubgen, the pinned nanobind of build/pytools-venv) imports the
# built loom._core and writes python/loom/_core/*.pyi (a folder: _core has submodules, linalg,
# random, ...), which are committed and installed with the package beside python/loom/py.typed.
# Run it after changing a binding in python/src; ctest python_stubs fails until then.
#   scripts/python_stubs.sh [BUILD_DIR]                 rewrite the committed stubs
#   scripts/python_stubs.sh --check BUILD_DIR OUT_DIR   write them under OUT_DIR and compare
# BUILD_DIR (default: build) holds the built module (BUILD_DIR/python/loom); LOOM_PYTOOLS_VENV
# names the venv (default: build/pytools-venv of the checkout, scripts/test_venv.sh pytools).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  build=${2:?usage: scripts/python_stubs.sh --check BUILD_DIR OUT_DIR}
  out=${3:?usage: scripts/python_stubs.sh --check BUILD_DIR OUT_DIR}
else
  build=${1:-$root/build}
  out=$root/python/loom
fi
venv=${LOOM_PYTOOLS_VENV:-$root/build/pytools-venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "python_stubs: no venv at $venv: run scripts/setup.sh (scripts/test_venv.sh pytools python/requirements-tools.txt)" >&2
  exit 2
fi
ls "$build"/python/loom/_core*.so > /dev/null 2>&1 || {
  echo "python_stubs: no built module in $build/python/loom: build the target loom_python first" >&2
  exit 2
}

gen=$out/_core
if [ "$check" = 1 ]; then rm -rf "$out" && mkdir -p "$out"; else rm -rf "$gen"; fi
# The venv's interpreter is /usr/bin/python3's, for which the module is built; the generator
# imports loom (its __init__ adds Tensor's NumPy-style methods, Layer.options) and then _core;
# python/stubs.pat writes what Python adds and the error classes (the generator cannot type them).
# -P: private names too (python/loom/*.py call _core._Model, _grad, ...; and DType.bool_, fill_, ...
# end in an underscore); -O: the folder of _core's stubs (named after its submodules).
PYTHONPATH=$build/python PYTHONDONTWRITEBYTECODE=1 LOOM_NUM_THREADS=1 \
  "$venv/bin/python" -m nanobind.stubgen -q -r -P -m loom._core -p "$root/python/stubs.pat" -O "$out" -M "$out/py.typed"

if [ "$check" = 0 ]; then
  echo "python_stubs: wrote $(find "$gen" -name '*.pyi' | wc -l) stub files under python/loom/_core"
  exit 0
fi
if ! diff -ru "$root/python/loom/_core" "$gen" > "$out/stubs.diff"; then
  echo "python_stubs: the committed stubs python/loom/_core/*.pyi are not those of the built module."
  echo "Run scripts/python_stubs.sh (after building loom_python) and commit the result. The difference"
  echo "(committed -> generated):"
  cat "$out/stubs.diff"
  exit 1
fi
[ -f "$root/python/loom/py.typed" ] || { echo "python_stubs: python/loom/py.typed is missing (PEP 561's marker)"; exit 1; }
echo "python_stubs: the committed stubs are current ($(find "$gen" -name '*.pyi' | wc -l) files)"
