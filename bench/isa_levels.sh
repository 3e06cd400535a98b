#!/usr/bin/env bash
# Issue 11's targets at each ISA level of this CPU, side by side in one run: Loom's four
# training steps, ResNet-18 inference and relu(a*b+c) next to PyTorch (eager and torch.compile)
# and ONNX Runtime, then one table of ratios per level (bench/isa_report.py).
#
#   bench/isa_levels.sh                   # levels "native avx2", 2 alternating rounds, 1 and 2 threads
#   LEVELS=avx2 REPEAT=1 bench/isa_levels.sh
#   PARTS="train resnet" bench/isa_levels.sh   # default: train resnet relu
#
# A level caps every library that dispatches on the CPU at run time:
#   native  nothing capped (AVX-512 where the CPU has it)
#   avx2    LOOM_SIMD=avx2, ONEDNN_MAX_CPU_ISA=AVX2 (Loom's and PyTorch's oneDNN),
#           OPENBLAS_CORETYPE=Haswell, ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2
#           (PyTorch's GEMM). ONNX Runtime's MLAS has no such switch: the ORT peer runs with
#           --cpuid-avx2, a patched copy of the package that is shown a CPUID without AVX-512
#           (bench/cpuid_avx2.py), and the report says so.
# Rounds alternate the sides (Loom, PyTorch, ORT, Loom, ...) so that a slow minute of a shared
# machine hits both; the report keeps each side's faster median and prints both.
#
# Environment: BUILD_DIR (default <repo>/build-bench, Release), OUT (default
# $BUILD_DIR/isa-results), PYTHON (default python3, with torch from bench/requirements.txt and
# onnxruntime from bench/requirements-onnx.txt; the ORT peer is skipped when it does not import),
# LOOM_BENCH_RESULTS (a file: the report also appends its figures there as result records for
# docs/benchmarks.md's tables, e.g. bench/results/$(date +%F)-xeon.jsonl; bench/results_table.py).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-bench}"
out="${OUT:-$build/isa-results}"
python="${PYTHON:-python3}"
levels="${LEVELS:-native avx2}"
repeat="${REPEAT:-2}"
parts=" ${PARTS:-train resnet relu} "

source "$here/build_targets.sh"
bench_build train_bench resnet_infer loom_bench
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "torch not found for $python: install bench/requirements.txt" >&2
  exit 1
fi
have_ort=0
if "$python" -c "import onnxruntime, onnxscript" >/dev/null 2>&1; then have_ort=1
else echo "onnxruntime not found for $python: skipping the ORT peer (bench/requirements-onnx.txt)" >&2; fi

level_caps() {
  case "$1" in
    native) echo "" ;;
    avx2) echo "LOOM_SIMD=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2" ;;
    *) echo "isa_levels.sh: unknown level '$1' (valid: native, avx2)" >&2; exit 2 ;;
  esac
}

mkdir -p "$out"
for level in $levels; do
  caps="$(level_caps "$level")"
  dir="$out/$level"
  # each level compiles torch.compile's kernels afresh: inductor code compiled for AVX-512 and
  # run under ATEN_CPU_CAPABILITY=avx2 gave NaN losses and a segfault (torch 2.15, AMD Zen 5)
  vars="TORCHINDUCTOR_CACHE_DIR=$dir/inductor-cache $caps"
  mkdir -p "$dir"
  : > "$dir/loom.jsonl"; : > "$dir/torch.jsonl"; : > "$dir/loom_resnet.txt"; : > "$dir/torch_resnet.txt"
  : > "$dir/ort_resnet.txt"
  {
    echo "level: $level (${caps:-nothing capped})"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "command: LEVELS=\"$levels\" REPEAT=$repeat PARTS=\"$(echo $parts)\" bench/isa_levels.sh"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  } > "$dir/run-info.txt"
  for r in $(seq 1 "$repeat"); do
    if [[ $parts == *" train "* ]]; then
      echo "$level, round $r/$repeat: train_bench, torch_train_peer.py" >&2
      env $vars "$build/bench/train_bench" --threads 1,2 >> "$dir/loom.jsonl"
      env $vars "$python" "$here/torch_train_peer.py" --threads 1,2 >> "$dir/torch.jsonl" ||
        echo "$level: torch_train_peer.py failed (its rows show 'not run')" >&2
    fi
    if [[ $parts == *" relu "* ]]; then
      echo "$level, round $r/$repeat: loom_bench, torch_peer.py (relu(a*b+c))" >&2
      for n in 1 2; do
        env $vars "$build/bench/loom_bench" --threads "$n" --only fused_relu_mul_add_1e6,eager_relu_mul_add_1e6 >> "$dir/loom.jsonl"
        env $vars "$python" "$here/torch_peer.py" --threads "$n" --only fused_relu_mul_add_1e6 >> "$dir/torch.jsonl"
      done
    fi
    if [[ $parts == *" resnet "* ]]; then
      echo "$level, round $r/$repeat: resnet_infer, torch_resnet_infer_peer.py, onnx_resnet_infer_peer.py" >&2
      env $vars "$build/bench/resnet_infer" 20 3 >> "$dir/loom_resnet.txt"
      env $vars "$python" "$here/torch_resnet_infer_peer.py" 20 3 >> "$dir/torch_resnet.txt" ||
        echo "$level: torch_resnet_infer_peer.py failed" >&2
      if [ "$have_ort" = 1 ]; then
        ort_flags=$([ "$level" = avx2 ] && echo --cpuid-avx2 || true)
        env $vars "$python" "$here/onnx_resnet_infer_peer.py" $ort_flags 20 3 >> "$dir/ort_resnet.txt" ||
          echo "$level: onnx_resnet_infer_peer.py failed" >&2
      fi
    fi
  done
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/run-info.txt"
done

"$python" "$here/isa_report.py" $(for level in $levels; do echo "$out/$level"; done) | tee "$out/report.md"
