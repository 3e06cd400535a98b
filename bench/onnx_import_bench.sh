#!/usr/bin/env bash
# Issue 33's benchmark: torchvision's ResNet-18 exported by Debian's torch at opset 17
# (tests/onnx/make_torch_resnet18.py), imported by Loom (io::import_onnx) and run through its
# compiled plan (bench/onnx_import_infer.cpp), against ONNX Runtime running the same file
# (bench/onnx_file_peer.py, the pinned ORT of tests/onnx/requirements.txt), batch 1 and 32,
# 1 and 2 threads, in one run; prints both and the ratio ORT ms / Loom ms (above 1: Loom faster).
#   bash bench/onnx_import_bench.sh [BUILD=build] [reps_b1=20] [reps_b32=3]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
reps1=${2:-20}
reps32=${3:-3}
venv=${LOOM_ONNX_VENV:-$here/../build/onnx-venv}
dir=$(mktemp -d /tmp/loom-onnx-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$here/../tests/onnx/make_torch_resnet18.py" "$dir" >/dev/null
"$build/bench/onnx_import_infer" "$dir/resnet18.onnx" "$reps1" "$reps32" "$dir/input.npy" "$dir/logits.npy" | tee "$dir/loom.txt"
"$venv/bin/python" "$here/onnx_file_peer.py" "$dir/resnet18.onnx" "$reps1" "$reps32" | tee "$dir/ort.txt"
python3 - "$dir/loom.txt" "$dir/ort.txt" <<'PY'
import re, sys
pat = re.compile(r"batch\s+(\d+) threads (\d): +([\d.]+) ms wall")
def read(p):
    return {(int(b), int(t)): float(ms) for b, t, ms in pat.findall(open(p).read())}
loom, ort = read(sys.argv[1]), read(sys.argv[2])
print("ResNet-18 (torch.onnx opset 17) imported: ORT ms / Loom ms (above 1: Loom faster)")
for key in sorted(loom):
    if key in ort:
        print(f"  batch {key[0]:2d} threads {key[1]}: Loom {loom[key]:8.1f} ms, ORT {ort[key]:8.1f} ms, ratio {ort[key] / loom[key]:.2f}")
PY
