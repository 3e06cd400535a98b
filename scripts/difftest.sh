#!/usr/bin/env bash
# Random differential testing against PyTorch (docs/testing.md, "Random differential testing").
#   scripts/difftest.sh [--seeds A:B] [--max-steps N] [--out DIR] [--verbose]
# Builds loom_difftest, writes the chains for seeds A..B-1 (default 0:2000) in batches of 500
# and checks each batch; prints every minimized mismatch (one line each, with a reproducer) and
# exits 1 if any batch had a mismatch outside the pending-fixes list.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=0:2000
steps=6
out=build/difftest_long
verbose=
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --max-steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --verbose) verbose=--verbose; shift ;;
    *) echo "usage: scripts/difftest.sh [--seeds A:B] [--max-steps N] [--out DIR] [--verbose]" >&2; exit 2 ;;
  esac
done
a=${seeds%:*}
b=${seeds#*:}
[ "$a" != "$seeds" ] || b=$((a + 1))
[ -d build ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target loom_difftest >/dev/null
status=0
for ((s = a; s < b; s += 500)); do
  e=$((s + 500 < b ? s + 500 : b))
  rm -rf "$out"
  build/tests/loom_difftest "$out" --seeds "$s:$e" --max-steps "$steps"
  /usr/bin/python3 tests/reference/check_difftest.py "$out" $verbose || status=1
done
exit $status
