#!/usr/bin/env bash
# Makes one of the tests' Python environments: `bash scripts/test_venv.sh NAME` makes a venv of
# Debian's python3 (python3-venv) in build/NAME-venv holding tests/NAME/requirements.txt's pinned
# PyPI packages (onnx: ONNX Runtime; tensorboard: TensorBoard's event reader; text: tokenizers and
# sentencepiece; hf: transformers). `bash scripts/test_venv.sh NAME FILE` takes them from FILE, a
# path from the checkout (python: the Python module's build requirement, nanobind, in
# python/requirements-build.txt). Run by scripts/setup.sh; does nothing when the venv already
# holds these requirements. A requirements file holding the line
#   # test_venv: system-site-packages
# gets a venv that also sees Debian's site packages (hf: transformers on Debian's python3-torch
# and python3-numpy, importable only by /usr/bin/python3 and too large to pip-install).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/test_venv.sh NAME (a folder of tests/ with a requirements.txt)}
req=${2:-tests/$name/requirements.txt}
[ -f "$req" ] || { echo "test_venv: no $req" >&2; exit 2; }
venv=build/$name-venv
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  exit 0
fi
echo "test_venv: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
venv_flags=()
if grep -qx '# test_venv: system-site-packages' "$req"; then venv_flags=(--system-site-packages); fi
/usr/bin/python3 -m venv "${venv_flags[@]}" "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir -r "$req"
cp "$req" "$stamp"
