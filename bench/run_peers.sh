#!/usr/bin/env bash
# Run the PyTorch peers (Python eager + LibTorch C++) for 1 and 2 threads and
# collect their JSON lines.
#
#   bench/run_peers.sh [--repeats R] [--threads "1 2"] [--out FILE] [--wait-idle]
#
# Each (peer, thread count) runs R times in fresh processes, interleaved, so a
# burst of outside load hits every configuration alike; take medians over the
# repeats. --wait-idle waits (up to 10 min per run) until the CPUs have been
# >= 90% idle for 5 s before each run: 2-thread timings on this 2-core box are
# worthless while anything else is running (see docs/benchmarks-peers-notes.md).
# The LibTorch part runs if bench/build_libtorch.sh has built it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
repeats=1 threads="1 2" out=/dev/stdout wait_idle=0
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --wait-idle) wait_idle=1; shift ;;
    *) echo "usage: $0 [--repeats R] [--threads \"1 2\"] [--out FILE] [--wait-idle]" >&2; exit 2 ;;
  esac
done
python="${PYTHON:-python3}"
libtorch_bin="${BUILD_DIR:-$repo/build-libtorch}/libtorch_overhead"

idle_pct() {  # percent idle over the next $1 seconds, from /proc/stat
  local _ a1 a2 a3 a4 a5 a6 a7 a8 b1 b2 b3 b4 b5 b6 b7 b8
  read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ < /proc/stat
  sleep "$1"
  read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ < /proc/stat
  local tot=$(( (b1+b2+b3+b4+b5+b6+b7+b8) - (a1+a2+a3+a4+a5+a6+a7+a8) ))
  local idle=$(( (b4+b5) - (a4+a5) ))
  echo $(( tot > 0 ? 100 * idle / tot : 0 ))
}
wait_for_idle() {
  [ "$wait_idle" = 1 ] || return 0
  local deadline=$(( $(date +%s) + 600 ))
  while [ "$(idle_pct 5)" -lt 90 ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "run_peers: machine still busy after 10 min; measuring anyway" >&2; return 0
    fi
  done
}

run_all() {
for r in $(seq 1 "$repeats"); do
  for t in $threads; do
    wait_for_idle
    "$python" "$here/torch_peer.py" --threads "$t" --details
    if [ -x "$libtorch_bin" ]; then
      wait_for_idle
      "$libtorch_bin" --threads "$t" --details
    fi
  done
done
}
if [ "$out" = /dev/stdout ]; then
  run_all
else
  tmp="$(mktemp "${out}.XXXXXX")"
  run_all > "$tmp"
  mv "$tmp" "$out"
fi
