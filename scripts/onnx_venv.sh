#!/usr/bin/env bash
# Makes the ONNX tests' Python environment: a venv of Debian's python3 (python3-venv) in
# build/onnx-venv with tests/onnx/requirements.txt's pinned packages (ONNX Runtime) from PyPI.
# Run by scripts/setup.sh; does nothing when the venv already holds these requirements.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${LOOM_ONNX_VENV:-build/onnx-venv}
req=tests/onnx/requirements.txt
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  exit 0
fi
echo "onnx_venv: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir -r "$req"
cp "$req" "$stamp"
