#!/usr/bin/env bash
# The dashboard against MLflow's UI on the same runs (docs/benchmarks.md, "Dashboard"):
# `store_bench ui-fill` writes 1,000 runs x 50 epochs (loss, accuracy, val_loss, val_accuracy,
# five hyper-parameters) into a Loom SQLite store, bench/ui_mlflow_fill.py the same values into
# MLflow's SQLite tracking store (log_batch); then bench/ui_bench.py starts `loom ui` and
# `mlflow server` on free loopback ports and times each API route and the runs page in headless
# Chromium. Prints the JSON lines and a table with the ratios.
#
#   bench/ui_bench.sh                     # 1000 runs x 50 epochs, 50 requests per route, 7 loads
#   RUNS=200 REQUESTS=20 LOADS=3 bench/ui_bench.sh
#
# Environment: LOOM_BENCH_RESULTS (a file for result records; bench/suite_records.py), BUILD_DIR
# (default <repo>/build-bench), MLFLOW_VENV (default $BUILD_DIR/mlflow-venv: made from
# bench/requirements-mlflow.txt when missing), WORK (default: a folder under /dev/shm, so that
# filling the stores is not a test of the disk's fsync), SKIP_BUILD, RUNS, EPOCHS, REQUESTS, LOADS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-bench}"
runs="${RUNS:-1000}"
epochs="${EPOCHS:-50}"
requests="${REQUESTS:-50}"
loads="${LOADS:-7}"
venv="${MLFLOW_VENV:-$build/mlflow-venv}"

source "$here/build_targets.sh"
[ -n "${SKIP_BUILD:-}" ] || bench_build store_bench loom_cli  # SKIP_BUILD=1: $BUILD_DIR is built

bench_venv "$venv" "$here/requirements-mlflow.txt"

shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=/tmp
work="${WORK:-$(mktemp -d "$shm/loom-ui-bench.XXXXXX")}"
cleanup() { [ -n "${WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
results="$work/results.jsonl"
: >"$results"

echo "+ store_bench ui-fill: $runs runs x $epochs epochs" >&2
"$build/bench/store_bench" ui-fill --store "$work/loom.db" --runs "$runs" --epochs "$epochs" --dump "$work/runs.json" | tee -a "$results"
echo "+ MLflow: the same runs" >&2
"$venv/bin/python" "$here/ui_mlflow_fill.py" --db "$work/mlflow.db" --runs "$work/runs.json" --artifacts "$work/mlartifacts" \
  2> >(grep -v "INFO" >&2) | tee -a "$results"
exp=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "mlflow" in l][0]["experiment_id"])' "$results")

/usr/bin/python3 "$here/ui_bench.py" --loom-cli "$build/tools/cli/loom" --loom-store "$work/loom.db" \
  --mlflow "$venv/bin/mlflow" --mlflow-db "$work/mlflow.db" --experiment "$exp" --requests "$requests" --loads "$loads" \
  | tee -a "$results"

echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/ui_bench_table.py" "$results"

# LOOM_BENCH_RESULTS=FILE: the figures of docs/benchmarks.md's rows also go to FILE as result
# records (bench/suite_records.py; bench/results_table.py renders them)
if [ -n "${LOOM_BENCH_RESULTS:-}" ]; then
  LOOM_BENCH_COMMAND="${LOOM_BENCH_COMMAND:-RUNS=$runs EPOCHS=$epochs REQUESTS=$requests LOADS=$loads bench/ui_bench.sh}" \
    python3 "$here/suite_records.py" ui "$results"
fi
