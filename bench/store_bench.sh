#!/usr/bin/env bash
# The store and workflow benchmarks side by side (docs/benchmarks.md, "Store and workflow"):
#   - the run registry against MLflow (bench/mlflow_peer.py, its SQLite backend): 200 runs with
#     parameters, per-epoch metrics and the model, then the top 5 and loading the best;
#   - task throughput with 1, 2 and 4 agent processes and the claim latency, on SQLite and on
#     PostgreSQL (a throwaway server started with tests/unit/store/pg_server.sh, durable: fsync on);
#   - one epoch of Fashion-MNIST through a dataset-store query vs the IDX files.
# Prints the JSON lines and a markdown table with the ratios.
#
#   bench/store_bench.sh            # everything
#   RUNS=50 BACKENDS=sqlite bench/store_bench.sh
#
# Environment: LOOM_BENCH_RESULTS (a file for result records; bench/suite_records.py),
# BUILD_DIR (default <repo>/build-bench), PYTHON (default python3; MLflow from
# bench/requirements-mlflow.txt is installed with pip when missing), RUNS, EPOCHS, TASKS, BACKENDS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-bench}"
python="${PYTHON:-python3}"
runs="${RUNS:-200}"
epochs="${EPOCHS:-10}"
tasks="${TASKS:-400}"
backends="${BACKENDS:-sqlite postgresql}"

source "$here/build_targets.sh"
bench_build store_bench
bin="$build/bench/store_bench"

if ! "$python" -c "import mlflow" >/dev/null 2>&1; then
  echo "mlflow not found for $python: installing bench/requirements-mlflow.txt" >&2
  "$python" -m pip install -q -r "$here/requirements-mlflow.txt"
fi

work=$(mktemp -d /tmp/loom-store-bench.XXXXXX)
pg_file="$work/pg_server.path"
cleanup() {
  [ -f "$pg_file" ] && bash "$repo/tests/unit/store/pg_server.sh" stop "$pg_file" || true
  rm -rf "$work"
}
trap cleanup EXIT
results="$work/results.jsonl"
: >"$results"

pg_url() {  # a new database on the throwaway server
  local dir name=$1
  dir=$(cat "$pg_file")
  psql -q -h "$dir" -U loom -d postgres -c "CREATE DATABASE $name" >/dev/null
  echo "postgresql://loom@/$name?host=$dir"
}

url_for() {  # url_for BACKEND NAME
  if [ "$1" = sqlite ]; then echo "$work/$2.db"; else pg_url "$2"; fi
}

run() { echo "+ $*" >&2; "$@" | tee -a "$results"; }

if [[ " $backends " == *" postgresql "* ]]; then
  PG_SERVER_DURABLE=1 bash "$repo/tests/unit/store/pg_server.sh" start "$pg_file"
fi

# The registry against MLflow: both on SQLite on the same disk.
mkdir -p "$work/mlflow"
run "$python" "$here/mlflow_peer.py" --dir "$work/mlflow" --runs "$runs" --epochs "$epochs"
run "$bin" registry --store "$(url_for sqlite registry)" --runs "$runs" --epochs "$epochs"
if [[ " $backends " == *" postgresql "* ]]; then
  run "$bin" registry --store "$(url_for postgresql registry)" --runs "$runs" --epochs "$epochs"
fi

for b in $backends; do
  for n in 1 2 4; do
    run "$bin" tasks --store "$(url_for "$b" "tasks$n")" --agents "$n" --tasks "$tasks"
  done
  run "$bin" claim --store "$(url_for "$b" claim)" --tasks 300
done

run "$bin" dataset --store "$(url_for sqlite dataset)"

echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
reg = {(r["impl"], r["backend"]): r for r in rows if r["bench"] == "registry"}
ml = reg.get(("mlflow", "sqlite"))
print("\n| registry, %d runs x %d epochs | log (s) | top 5 (ms) | load best (ms) | total (s) | MLflow / Loom |" % (ml["runs"], ml["epochs"]))
print("|---|---:|---:|---:|---:|---:|")
for (impl, backend), r in sorted(reg.items()):
    name = "MLflow %s (%s)" % (r.get("version", ""), backend) if impl == "mlflow" else "Loom (%s)" % backend
    ratio = ml["total_s"] / r["total_s"]
    print("| %s | %.2f | %.1f | %.1f | %.2f | %.1f |" % (name, r["log_s"], r["search_s"] * 1e3, r["load_s"] * 1e3, r["total_s"], ratio))
print("\n| tasks (no-op) | 1 agent | 2 agents | 4 agents | claim median / p99 (ms) | finish median (ms) |")
print("|---|---:|---:|---:|---:|---:|")
for b in ("sqlite", "postgresql"):
    t = {r["agents"]: r["tasks_per_s"] for r in rows if r["bench"] == "tasks" and r["backend"] == b}
    c = [r for r in rows if r["bench"] == "claim" and r["backend"] == b]
    if not t:
        continue
    cl = "%.2f / %.2f" % (c[0]["claim_ms_median"], c[0]["claim_ms_p99"]) if c else "-"
    fi = "%.2f" % c[0]["finish_ms_median"] if c else "-"
    print("| %s, tasks/s | %.0f | %.0f | %.0f | %s | %s |" % (b, t.get(1, 0), t.get(2, 0), t.get(4, 0), cl, fi))
for r in rows:
    if r["bench"] == "dataset":
        print("\n| Fashion-MNIST train, 1 epoch, batch 128 | IDX files (s) | store query (s) | store / IDX speed |")
        print("|---|---:|---:|---:|")
        print("| %s | %.3f | %.3f | %.2f |" % (r["backend"], r["idx_epoch_s"], r["store_epoch_s"], r["store_over_idx_speed"]))
EOF

# LOOM_BENCH_RESULTS=FILE: the figures of docs/benchmarks.md's rows also go to FILE as result
# records (bench/suite_records.py; bench/results_table.py renders them)
if [ -n "${LOOM_BENCH_RESULTS:-}" ]; then
  LOOM_BENCH_COMMAND="${LOOM_BENCH_COMMAND:-RUNS=$runs EPOCHS=$epochs TASKS=$tasks BACKENDS=\"$backends\" bench/store_bench.sh}" "$python" "$here/suite_records.py" store "$results"
fi
