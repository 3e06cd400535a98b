#!/usr/bin/env bash
# Task graphs against Ray (docs/benchmarks.md, "Task graphs against Ray"): the same no-op plans
# run by Loom's agents on a store (SQLite, and PostgreSQL on a throwaway durable server) and by
# Ray on a local single-node cluster (bench/ray_peer.py, Ray from bench/requirements-ray.txt):
#   - dag:   1,000 tasks, one root, 998 depending on it, one depending on all of those:
#            tasks per second from the root's start to the last task's end;
#   - chain: 100 tasks, each depending on the one before: the time from a task's end to its
#            dependent's start (median and p90).
# First, the rate of bare durable commits on each backend (store_bench commit): the ceiling of
# anything committing once per task. Loom's tasks are persisted (an agent records a task's end and claims its next task in one
# durable commit; with --batch K, up to K tasks' ends and claims per commit); Ray's are not.
#
#   bench/dag_bench.sh                       # agents 1 and 2, both backends
#   AGENTS="2" BACKENDS=sqlite BATCHES="1" POLL_MS=500 bench/dag_bench.sh
#
# Environment: BUILD_DIR (default <repo>/build-bench: store_bench is built there, Ray's venv made
# there), STORE_BENCH (a store_bench already built: no build), AGENTS, BACKENDS, BATCHES (the
# agents' flow::AgentOptions::batch, default "0 1 16": 0, the default, adapts), POLL_MS (an idle
# agent's longest wait; commits that make a task claimable wake it at once; default 500, the
# agents' default), TASKS (dag size), CHAIN (chain length).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-bench}"
agents="${AGENTS:-1 2}"
backends="${BACKENDS:-sqlite postgresql}"
batches="${BATCHES:-0 1 16}"
poll_ms="${POLL_MS:-500}"
tasks="${TASKS:-1000}"
chain="${CHAIN:-100}"

source "$here/build_targets.sh"
if [ -n "${STORE_BENCH:-}" ]; then  # a store_bench built elsewhere (the ordinary build has it with LOOM_BUILD_BENCH=ON)
  bin="$STORE_BENCH"
else
  bench_build store_bench
  bin="$build/bench/store_bench"
fi

venv="$build/ray-bench-venv"
bench_venv "$venv" "$here/requirements-ray.txt"

work=$(mktemp -d /tmp/loom-dag-bench.XXXXXX)
pg_file="$work/pg_server.path"
cleanup() {
  [ -f "$pg_file" ] && bash "$repo/tests/unit/store/pg_server.sh" stop "$pg_file" || true
  rm -rf "$work"
}
trap cleanup EXIT
results="$work/results.jsonl"
: >"$results"

n_db=0
url=""
new_store() {  # new_store BACKEND: sets url to a new, empty store (not in a subshell: n_db counts)
  n_db=$((n_db + 1))
  if [ "$1" = sqlite ]; then
    url="$work/s$n_db.db"
  else
    local dir
    dir=$(cat "$pg_file")
    psql -q -h "$dir" -U loom -d postgres -c "CREATE DATABASE dag$n_db" >/dev/null
    url="postgresql://loom@/dag$n_db?host=$dir"
  fi
}
run() { echo "+ $*" >&2; "$@" | tee -a "$results"; }

if [[ " $backends " == *" postgresql "* ]]; then
  PG_SERVER_DURABLE=1 bash "$repo/tests/unit/store/pg_server.sh" start "$pg_file"
fi

for b in $backends; do  # the ceiling of one durable commit per task, on this disk now
  new_store "$b"
  run "$bin" commit --store "$url"
done
for n in $agents; do
  for b in $backends; do
    for k in $batches; do
      new_store "$b"
      run "$bin" dag --store "$url" --agents "$n" --tasks "$tasks" --poll-ms "$poll_ms" --batch "$k"
      new_store "$b"
      run "$bin" chain --store "$url" --agents "$n" --tasks "$chain" --poll-ms "$poll_ms" --batch "$k"
    done
  done
  run "$venv/bin/python" "$here/ray_peer.py" dag --agents "$n" --tasks "$tasks"
  run "$venv/bin/python" "$here/ray_peer.py" chain --agents "$n" --tasks "$chain"
done

echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in rows:
    if r["bench"] == "commit":
        print("bare durable commits (%s): %.0f/s" % (r["backend"], r["commits_per_s"]))
ray = {(r["bench"], r["agents"]): r for r in rows if r["impl"] == "ray"}
print("\n| %d-task DAG (fan-out, fan-in) | agents | tasks/s | Loom / Ray | chain: end to dependent's start, median / p90 (ms) |" %
      next(r["tasks"] for r in rows if r["bench"] == "dag"))
print("|---|---:|---:|---:|---:|")
for r in rows:
    if r["bench"] != "dag":
        continue
    c = next(x for x in rows if x["bench"] == "chain" and x["impl"] == r["impl"] and x["backend"] == r["backend"] and x["agents"] == r["agents"]
             and x.get("batch") == r.get("batch"))
    peer = ray.get(("dag", r["agents"]))
    ratio = "%.2f" % (r["tasks_per_s"] / peer["tasks_per_s"]) if peer and r["impl"] == "loom" else "-"
    name = "Ray %s (in memory)" % r["version"] if r["impl"] == "ray" else "Loom (%s, persisted, batch %s, poll %d ms)" % (r["backend"], r["batch"] or "adaptive", r["poll_ms"])
    print("| %s | %d | %.0f | %s | %.2f / %.2f |" % (name, r["agents"], r["tasks_per_s"], ratio, c["gap_ms_median"], c["gap_ms_p90"]))
EOF
