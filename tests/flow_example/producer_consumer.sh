#!/usr/bin/env bash
# The producer/consumer exchange example with short settings (docs/workflow.md, "Examples"):
# 3 producer processes push 4 rounds of records each, one consumer trains and publishes.
# Every push must be consumed exactly once, each producer must have acted with strictly newer
# parameters every round, and the parameters must have learned (the loss of records made with
# the newest parameters is a tenth of that with the first).
set -euo pipefail
build="$1"
producers=3 rounds=4
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- output"; cat "$out/log"; exit 1; }

"$build/examples/flow_producer_consumer" run --store "$out/exchange.db" --producers $producers --rounds $rounds --records 32 \
  > "$out/log" 2>&1 || fail "the run exited with status $?"

# "pushed producer=P round=R records=N params=V loss=L" and "consumed producer=P round=R records=N"
sed -n 's/^pushed producer=\([0-9]*\) round=\([0-9]*\) records=\([0-9]*\) .*/\1 \2 \3/p' "$out/log" | sort > "$out/pushed"
sed -n 's/^consumed producer=\([0-9]*\) round=\([0-9]*\) records=\([0-9]*\) .*/\1 \2 \3/p' "$out/log" | sort > "$out/consumed"
for p in $(seq $producers); do for r in $(seq $rounds); do echo "$p $r 32"; done; done | sort > "$out/expected"
diff "$out/expected" "$out/pushed" > /dev/null || fail "the producers did not push every round once"
diff "$out/pushed" "$out/consumed" > /dev/null || fail "the consumed records differ from the pushed ones (missing or duplicated)"
grep -q '^records left unconsumed: 0;' "$out/log" || fail "records were left in the store"

for p in $(seq $producers); do
  sed -n "s/^pushed producer=$p round=\([0-9]*\) records=[0-9]* params=\([0-9]*\) loss=\([0-9.]*\) .*/\1 \2 \3/p" "$out/log" \
    | sort -n > "$out/p$p"
  awk 'NR > 1 && $2 <= prev { bad = 1 } { prev = $2 } END { exit bad }' "$out/p$p" \
    || fail "producer $p did not see strictly increasing parameter versions: $(awk '{printf "%s ", $2}' "$out/p$p")"
done
# Learning: records made with the newest parameters have a tenth of the loss of those made with
# the first (per producer this would depend on timing: one that starts late only ever sees
# parameters that have already learned).
sed -n 's/^pushed producer=[0-9]* round=[0-9]* records=[0-9]* params=\([0-9]*\) loss=\([0-9.]*\) .*/\1 \2/p' "$out/log" \
  | sort -n > "$out/by_version"
awk 'NR == 1 { first = $2 } { last = $2 } END { exit !(last < first / 10) }' "$out/by_version" \
  || fail "the loss did not drop tenfold from the first parameters to the last ($(awk '{printf "v%s:%s ", $1, $2}' "$out/by_version"))"
echo "flow example (producers and consumer): passed"
