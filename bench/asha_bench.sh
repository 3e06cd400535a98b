#!/usr/bin/env bash
# An ASHA search against Ray Tune (docs/benchmarks.md, "ASHA search against Ray Tune"): the same
# random search of the Fashion-MNIST MLP's learning rate and hidden width, ASHA (r = 1, R = EPOCHS,
# eta = 3), one trial at a time with THREADS compute threads, by Loom (bench/asha_bench.cpp: flow
# tasks on a SQLite store, one agent) and by Ray Tune's ASHAScheduler on PyTorch
# (bench/ray_tune_peer.py, Ray from bench/requirements-ray-tune.txt, Debian's python3-torch):
#   1. Loom draws its points (RandomSampler, SEED) and runs the search;
#   2. Ray Tune runs Loom's points in the same order (the same trials: the fair speed comparison);
#   3. Ray Tune runs its own random draws (SEED).
# Prints each run's JSON line, then a table: wall time, Loom / Ray speed (Ray's wall time over
# Loom's), the part spent training and validating inside the trials and the rest (scheduling,
# reports, trial start-up), epochs spent, trials stopped early, best validation accuracy.
#
#   bench/asha_bench.sh
#   TRIALS=9 EPOCHS=3 TRAIN=2000 VAL=500 bench/asha_bench.sh     # a quick check
#
# Environment: BUILD_DIR (default <repo>/build-bench: asha_bench is built there, Ray Tune's venv
# made there), ASHA_BENCH (an asha_bench already built: no build), TRAIN (10000), VAL (2000),
# EPOCHS (R, 9), TRIALS (27), SEED (1), THREADS (2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-bench}"
args=(--train "${TRAIN:-10000}" --val "${VAL:-2000}" --epochs "${EPOCHS:-9}" --trials "${TRIALS:-27}"
      --seed "${SEED:-1}" --threads "${THREADS:-2}")

source "$here/build_targets.sh"
if [ -n "${ASHA_BENCH:-}" ]; then  # an asha_bench built elsewhere (the ordinary build has it with LOOM_BUILD_BENCH=ON)
  bin="$ASHA_BENCH"
else
  bench_build asha_bench
  bin="$build/bench/asha_bench"
fi

venv="$build/ray-tune-venv"
bench_venv "$venv" "$here/requirements-ray-tune.txt" --system-site-packages  # Debian's python3-torch

work=$(mktemp -d /tmp/loom-asha-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
results="$work/results.jsonl"
loads="load $(cut -d' ' -f1 /proc/loadavg)"

echo "+ $bin ${args[*]}" >&2
"$bin" "${args[@]}" | tail -n 1 | tee -a "$results"
python3 -c 'import json, sys; print(json.dumps([t["params"] for t in json.loads(sys.stdin.readline())["trial_list"]]))' \
  <"$results" >"$work/points.json"
loads="$loads, $(cut -d' ' -f1 /proc/loadavg)"
for points in "$work/points.json" ""; do
  peer=("$venv/bin/python" "$here/ray_tune_peer.py" "${args[@]}")
  [ -n "$points" ] && peer+=(--points "$points")
  echo "+ ${peer[*]}" >&2
  "${peer[@]}" 2>"$work/ray.log" | tail -n 1 | tee -a "$results" || { cat "$work/ray.log" >&2; exit 1; }
  loads="$loads, $(cut -d' ' -f1 /proc/loadavg)"
done

echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $loads (before and after each run)"
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loom = rows[0]
print("\n%d trials, %d training / %d validation images, ASHA r = %d, R = %d, eta = %d, threads: %d, 1 trial at a time" %
      (loom["trials"], loom["train"], loom["val"], loom["r"], loom["R"], loom["eta"], loom["threads"]))
print("| search | wall (s) | Loom / Ray speed | training in trials (s) | rest (s) | epochs spent | stopped early | best validation accuracy (lr, width) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    name = "Loom (SQLite store)" if r["impl"] == "loom" else "Ray Tune %s + torch %s, %s" % (r["version"], r["torch"], r["sampler"])
    speed = "-" if r["impl"] == "loom" else "%.2f" % (r["wall_s"] / loom["wall_s"])
    p = r["best_params"]
    print("| %s | %.1f | %s | %.1f | %.1f | %d | %d / %d | %.4f (%.2g, %d) |" % (
        name, r["wall_s"], speed, r["train_s"], r["wall_s"] - r["train_s"], r["epochs"], r["stopped"], r["trials"],
        r["best_accuracy"], p["lr"], p["width"]))
PY
