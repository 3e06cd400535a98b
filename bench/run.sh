#!/usr/bin/env bash
# Runs the Loom benchmark suite next to its PyTorch peers and prints the markdown report.
#
#   bench/run.sh                 # build (Release), run everything for 1 and 2 threads, report
#   REPEAT=3 bench/run.sh        # run each program 3 times; the report keeps each best median
#   THREADS="1 2 4" bench/run.sh
#   TRAIN=0 bench/run.sh         # without the training-throughput block (train_bench and peers)
#   PYTHON_TRAIN=0 bench/run.sh  # without Loom from Python against C++ (bench/python_train.py)
#
# Environment: BUILD_DIR (default <repo>/build-bench), OUT (results folder, default
# $BUILD_DIR/bench-results), LIBTORCH_BIN (the LibTorch peer binary; default
# <repo>/build-libtorch/libtorch_overhead, run only when present; BUILD_LIBTORCH=1 builds it
# with bench/build_libtorch.sh first), PYTHON (default python3, needs torch from
# bench/requirements.txt; installed with pip when missing), LOOM_BENCH_RESULTS (a file: the report
# also appends the figures of docs/benchmarks.md's ops table there as result records, e.g.
# bench/results/$(date +%F)-zen5.jsonl; bench/results_table.py renders them).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-bench}"
out="${OUT:-$build/bench-results}"
python="${PYTHON:-python3}"
threads="${THREADS:-1 2}"
repeat="${REPEAT:-1}"
libtorch_bin="${LIBTORCH_BIN:-$repo/build-libtorch/libtorch_overhead}"

source "$here/build_targets.sh"
bench_build loom_bench conv_bench graph_overhead

if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "torch not found for $python: installing bench/requirements.txt" >&2
  "$python" -m pip install -r "$here/requirements.txt"
fi
if [ "${BUILD_LIBTORCH:-0}" = 1 ]; then
  BUILD_DIR="$(dirname "$libtorch_bin")" PYTHON="$python" "$here/build_libtorch.sh"
fi

mkdir -p "$out"
: > "$out/loom.jsonl"
: > "$out/torch.jsonl"
: > "$out/libtorch.jsonl"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/run-info.txt"

for r in $(seq 1 "$repeat"); do
  for n in $threads; do
    echo "run $r/$repeat, $n thread(s): loom_bench" >&2
    "$build/bench/loom_bench" --threads "$n" >> "$out/loom.jsonl"
    echo "run $r/$repeat, $n thread(s): torch_peer.py" >&2
    "$python" "$here/torch_peer.py" --threads "$n" >> "$out/torch.jsonl"
    echo "run $r/$repeat, $n thread(s): conv_bench, torch_conv_peer.py, graph_overhead" >&2
    "$build/bench/conv_bench" --threads "$n" >> "$out/loom.jsonl"
    "$python" "$here/torch_conv_peer.py" --threads "$n" >> "$out/torch.jsonl"
    "$build/bench/graph_overhead" "$n" >> "$out/loom.jsonl"
    if [ -x "$libtorch_bin" ]; then
      echo "run $r/$repeat, $n thread(s): libtorch_overhead" >&2
      "$libtorch_bin" --threads "$n" >> "$out/libtorch.jsonl"
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run-info.txt"

# Training throughput (bench/train_bench.cpp; peers bench/torch_train_peer.py with eager and
# torch.compile, bench/keras_train_peer.py when keras imports). TRAIN=0 skips it;
# TORCH_COMPILE=0 skips the torch.compile variants (their first step compiles for ~1 minute).
: > "$out/keras.jsonl"
if [ "${TRAIN:-1}" = 1 ]; then
  bench_build train_bench
  compile_flag=()
  if [ "${TORCH_COMPILE:-1}" = 0 ]; then compile_flag=(--no-compile); fi
  have_keras=0
  if "$python" -c "import keras, jax" >/dev/null 2>&1; then have_keras=1
  else echo "keras/jax not found for $python: skipping the Keras peer (bench/requirements-keras.txt)" >&2; fi
  for r in $(seq 1 "$repeat"); do
    for n in $threads; do
      echo "run $r/$repeat, $n thread(s): train_bench, torch_train_peer.py" >&2
      "$build/bench/train_bench" --threads "$n" >> "$out/loom.jsonl"
      "$python" "$here/torch_train_peer.py" --threads "$n" "${compile_flag[@]}" >> "$out/torch.jsonl"
      if [ "$have_keras" = 1 ]; then
        echo "run $r/$repeat, $n thread(s): keras_train_peer.py" >&2
        "$python" "$here/keras_train_peer.py" --threads "$n" >> "$out/keras.jsonl"
      fi
    done
  done
  echo "load after training: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run-info.txt"
fi

# Loom from Python against Loom from C++ and PyTorch from Python (bench/python_train.py, issue
# 49): needs the Python module (LOOM_PYTHON), built into $build/python. PYTHON_TRAIN=0 skips it.
: > "$out/python_train.jsonl"
if [ "${PYTHON_TRAIN:-1}" = 1 ]; then
  if bench_build loom_python train_bench python_twin_bench 2>/dev/null; then
    for n in $threads; do
      echo "$n thread(s): python_train.py" >&2
      PYTHONPATH="$build/python" "$python" "$here/python_train.py" --threads "$n" --build "$build" \
        >> "$out/python_train.jsonl" || echo "python_train.py failed (status $?): see above" >&2
    done
  else
    echo "no Python module in $build (LOOM_PYTHON: python3-dev and nanobind): skipping python_train.py" >&2
  fi
fi

LOOM_BENCH_COMMAND="REPEAT=$repeat THREADS=\"$threads\" bench/run.sh" \
"$python" "$here/report.py" --loom "$out/loom.jsonl" --torch "$out/torch.jsonl" \
  --libtorch "$out/libtorch.jsonl" --keras "$out/keras.jsonl" | tee "$out/report.md"
