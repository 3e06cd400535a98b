#!/usr/bin/env bash
# `loom serve` against the way Python users usually serve a PyTorch model (FastAPI + uvicorn,
# bench/serve_peer.py) on the same MLP (784 -> 256 -> 10) and the same request, on loopback,
# under the same bounded load (bench/serve_load.cpp: CLIENTS connections, REQUESTS each, one row
# per request): throughput and p50/p99 latency, Loom with dynamic batching and without.
#
#   bash bench/serve_bench.sh [BUILD=build] [CLIENTS=16] [REQUESTS=300] [THREADS=2]
#
# THREADS: compute threads of both servers (LOOM_NUM_THREADS, torch.set_num_threads).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
clients=${2:-16}
requests=${3:-300}
threads=${4:-2}
cmake --build "$build" --target serve_load serve_prep loom_cli >/dev/null

source "$here/build_targets.sh"
venv="$build/serve-bench-venv"
bench_venv "$venv" "$here/requirements-serve.txt" --system-site-packages

work=$(mktemp -d /tmp/loom-serve-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
"$build/bench/serve_prep" "$work" >/dev/null
path=/v2/models/mlp/infer

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ready() {  # ready PORT: any HTTP answer means the server is up
  for _ in $(seq 300); do
    code=$(/usr/bin/python3 -c "
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen('http://127.0.0.1:$1$path', data=b'{}', timeout=1)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print(0)")
    [ "$code" != 0 ] && return 0
    sleep 0.1
  done
  echo "serve_bench: no server on port $1" >&2
  return 1
}

load() {  # load NAME PORT
  echo "+ $1: $clients clients x $requests requests" >&2
  "$build/bench/serve_load" 127.0.0.1 "$2" "$path" "$work/body.json" "$clients" "$requests" | tee "$work/$1.json"
}

for mode in batched unbatched; do
  port=$(free_port)
  batch=32
  [ $mode = unbatched ] && batch=1
  LOOM_NUM_THREADS=$threads "$build/tools/cli/loom" --store "$work/serve.db" serve mlp --port "$port" --max-batch $batch \
    --threads 64 --reload-ms 0 >"$work/loom-$mode.log" 2>&1 &
  pids+=($!)
  ready "$port"
  load "loom_$mode" "$port"
  kill "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null || true
done

port=$(free_port)
"$venv/bin/python" "$here/serve_peer.py" "$work/mlp.safetensors" "$port" "$threads" >"$work/peer.log" 2>&1 &
pids+=($!)
ready "$port"
load fastapi "$port"

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
python3 - "$work" "$cpu" "$threads" "$clients" "$requests" <<'PY'
import json, sys
work, cpu, threads, clients, requests = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
r = {k: json.load(open(f"{work}/{k}.json")) for k in ("loom_batched", "loom_unbatched", "fastapi")}
peer = r["fastapi"]
print(f"\nMLP 784-256-10, one row per request, {clients} clients x {requests} requests, loopback; "
      f"{cpu}, {threads} compute threads each")
print("| server | requests/s | p50 ms | p99 ms | throughput / FastAPI's | FastAPI's p99 / this p99 |")
print("|---|---:|---:|---:|---:|---:|")
for k, name in (("loom_batched", "loom serve, batching (up to 32)"), ("loom_unbatched", "loom serve, no batching"),
                ("fastapi", "FastAPI + uvicorn + PyTorch")):
    x = r[k]
    print(f"| {name} | {x['throughput']:.0f} | {x['p50_ms']:.2f} | {x['p99_ms']:.2f} | "
          f"{x['throughput'] / peer['throughput']:.2f} | {peer['p99_ms'] / x['p99_ms']:.2f} |")
PY
