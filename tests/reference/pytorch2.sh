#!/usr/bin/env bash
# reference_pytorch2 (docs/testing.md): the op cases of the ops that Debian's torch 1.13 lacks,
# replayed by check_ops.py through torch 2's own functions (F.scaled_dot_product_attention, whose
# fused CPU kernel is the peer of Loom's, and F.rms_norm), where the table's other replays (the
# ctest reference_pytorch) had to write them out. torch 2 is PyPI's (bench/requirements.txt, the
# benchmarks' peer): its Linux wheels need CUDA's, gigabytes, so no script of the project installs
# it, and the test is skipped (77) where `python3` (or $LOOM_TORCH2_PYTHON) imports no torch >= 2.
# Usage: pytorch2.sh LOOM_OPCHECK OUTDIR
set -euo pipefail
opcheck=$1 out=$2
py=${LOOM_TORCH2_PYTHON:-python3}
if ! "$py" -c 'import sys, numpy, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
  echo "reference_pytorch2: skipped: '$py' imports no torch >= 2 with numpy (python3 -m pip install -r bench/requirements.txt)"
  exit 77
fi
rm -rf "$out"
"$opcheck" "$out"
exec "$py" "$(dirname "$0")/check_ops.py" "$out" --only scaled_dot_product_attention,rms_norm
