#!/usr/bin/env bash
# Data-parallel benchmarks side by side (docs/benchmarks.md, "Data-parallel"):
#   1. float32 allreduce, 1 KiB .. 64 MiB: loom::dist::allreduce against raw MPI_Allreduce on the
#      same buffers, 2 processes (bench/dist_bench.cpp, `allreduce`);
#   2. one training step of the main job's CNN, global batch 128: Loom 2 processes x 1 thread
#      (DistributedOptimizer; plain and synchronized batch norm), Loom 1 process x 2 threads and
#      x 1 thread, against PyTorch DDP on gloo 2 processes x 1 thread and torch 1 process
#      (bench/torch_ddp_peer.py).
# Every measurement runs REPEAT times (default 3); the tables keep, per configuration, the best
# (lowest) of the runs' medians and show every run's, with the 1-minute load average (uptime)
# read just before each run. Prints the JSON lines and markdown tables with the ratios.
#
#   bench/dist_bench.sh                 # everything
#   REPEAT=5 ONLY=allreduce bench/dist_bench.sh
#
# Environment: LOOM_BENCH_RESULTS (a file for result records; bench/suite_records.py),
# BUILD_DIR (default <repo>/build-bench), PYTHON (default python3; torch from
# bench/requirements.txt is installed with pip when missing), REPEAT, STEPS (default 30),
# ONLY (allreduce or cnn), NP (default 2), RUN_TIMEOUT (seconds per command, default 900).
# Open MPI runs as in the tests (tests/CMakeLists.txt): shared memory (vader) without the
# single-copy mechanism (containers deny CMA), no UCX; --allow-run-as-root when root.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-bench}"
python="${PYTHON:-python3}"
repeat="${REPEAT:-3}"
steps="${STEPS:-30}"
only="${ONLY:-}"
np="${NP:-2}"
run_timeout="${RUN_TIMEOUT:-900}"  # seconds per command: a hung rank ends the run, not the script

source "$here/build_targets.sh"
bench_build dist_bench
bin="$build/bench/dist_bench"

if [ "$only" != allreduce ] && ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "torch not found for $python: installing bench/requirements.txt" >&2
  "$python" -m pip install -q -r "$here/requirements.txt"
fi

export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
mpirun=(mpirun --oversubscribe -np "$np")
if [ "$(id -u)" = 0 ]; then mpirun+=(--allow-run-as-root); fi

work=$(mktemp -d /tmp/loom-dist-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
results="$work/results.jsonl"
: >"$results"

load() { cut -d' ' -f1 /proc/loadavg; }
# run RUN_INDEX COMMAND...: runs it, tags each JSON line with the run and the load before it
run() {
  local i=$1 l
  shift
  l=$(load)
  echo "+ [run $i, load $l] $*" >&2
  timeout "$run_timeout" "$@" | "$python" -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line); r["run"] = int(sys.argv[1]); r["load"] = float(sys.argv[2])
        print(json.dumps(r), flush=True)' "$i" "$l" | tee -a "$results"
}

for i in $(seq 1 "$repeat"); do
  if [ -z "$only" ] || [ "$only" = allreduce ]; then
    run "$i" "${mpirun[@]}" "$bin" allreduce
  fi
  if [ -z "$only" ] || [ "$only" = cnn ]; then
    run "$i" "${mpirun[@]}" "$bin" cnn --steps "$steps"
    run "$i" "${mpirun[@]}" "$bin" cnn --steps "$steps" --sync-bn
    run "$i" "$bin" cnn --steps "$steps" --threads 2
    run "$i" "$bin" cnn --steps "$steps" --threads 1
    run "$i" "$python" "$here/torch_ddp_peer.py" --nproc "$np" --threads 1 --steps "$steps"
    run "$i" "$python" "$here/torch_ddp_peer.py" --nproc "$np" --threads 1 --steps "$steps" --no-broadcast-buffers
    run "$i" "$python" "$here/torch_ddp_peer.py" --nproc 1 --threads 2 --steps "$steps"
  fi
done

"$python" - "$results" <<'EOF'
import json, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]

def runs_text(rs, key, scale, fmt):
    return ", ".join(f"{r[key] * scale:{fmt}} @{r['load']:.1f}" for r in sorted(rs, key=lambda r: r["run"]))

ar = defaultdict(list)
for r in rows:
    if r["bench"] == "allreduce":
        ar[r["bytes"]].append(r)
if ar:
    # Per size: the best (lowest) median over the runs for each peer, and the fastest single rep.
    print("\n| size | raw MPI µs | loom µs | raw/loom | loom bus GB/s | fastest rep raw / loom µs | runs: raw / loom median µs @ load |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for b in sorted(ar):
        rs = sorted(ar[b], key=lambda r: r["run"])
        raw, lm = min(r["raw_us"] for r in rs), min(r["loom_us"] for r in rs)
        timed = [r for r in rs if "raw_min_us" in r]  # results of older builds lack it
        fast = f"{min(r['raw_min_us'] for r in timed):.1f} / {min(r['loom_min_us'] for r in timed):.1f}" if timed else "-"
        size = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
        busbw = b / (lm * 1e-6) * 2 * (rs[0]["ranks"] - 1) / rs[0]["ranks"] / 1e9
        runs = ", ".join(f"{r['raw_us']:.1f} / {r['loom_us']:.1f} @{r['load']:.1f}" for r in rs)
        print(f"| {size} | {raw:.1f} | {lm:.1f} | {raw / lm:.2f} | {busbw:.2f} | {fast} | {runs} |")

cnn = defaultdict(list)
for r in rows:
    if r["bench"] == "cnn_step":
        label = r["impl"].split(" ")[0]
        label += f" {r['ranks']} proc x {r['threads']} thr"
        if r.get("sync_bn"): label += ", sync BN"
        if r["impl"] != "loom" and r["ranks"] > 1:
            label += ", DDP" + ("" if r.get("broadcast_buffers") else " (no buffer broadcast)")
        cnn[label].append(r)
if cnn:
    best = {k: min(r["median_s"] for r in v) for k, v in cnn.items()}
    print("\n| configuration | step ms (best median) | runs (ms @ load) |")
    print("|---|---:|---|")
    for k, v in cnn.items():
        print(f"| {k} | {best[k] * 1e3:.1f} | {runs_text(v, 'median_s', 1e3, '.1f')} |")
    def ratio(a, b, what):
        if a in best and b in best:
            print(f"- {what}: {best[a] / best[b]:.2f}  ({a} / {b})")
    print()
    loom2 = next((k for k in best if k.startswith("loom 2") and "sync" not in k), None)
    for k in best:  # the peers with the same processes and threads as loom2
        if k.startswith("torch") and loom2 and k.split(",")[0][6:] == loom2[5:]:
            ratio(k, loom2, "torch/loom")
    ratio("loom 1 proc x 2 thr", loom2, "loom 1x2 / loom 2x1") if loom2 else None
EOF

# LOOM_BENCH_RESULTS=FILE: the figures of docs/benchmarks.md's rows also go to FILE as result
# records (bench/suite_records.py; bench/results_table.py renders them)
if [ -n "${LOOM_BENCH_RESULTS:-}" ]; then
  LOOM_BENCH_COMMAND="${LOOM_BENCH_COMMAND:-REPEAT=$repeat STEPS=$steps ONLY=$only NP=$np bench/dist_bench.sh}" "$python" "$here/suite_records.py" dist "$results"
fi
