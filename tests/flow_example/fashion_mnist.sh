#!/usr/bin/env bash
# The Fashion-MNIST workflow example with tiny settings (docs/workflow.md, "Examples"): a
# dispatcher, two agent processes, four train tasks of one epoch on 3000 images, a fresh
# evaluate process. Fails (never skips) when the dataset is not installed.
set -euo pipefail
build="$1"
data=/usr/share/datasets/fashion-mnist
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  if [ ! -f "$data/$f" ]; then
    echo "FAIL: $data/$f is missing: install the Debian package dataset-fashion-mnist (scripts/setup.sh)"
    exit 1
  fi
done
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- output"; cat "$out/log"; exit 1; }

"$build/examples/flow_fashion_mnist" dispatch --store "$out/flow.db" --epochs 1 --limit-samples 3000 --agents 2 \
  > "$out/log" 2>&1 || fail "the dispatcher exited with status $?"

# the summary table: task status attempts agent lr hidden model test_accuracy
awk '$2 == "finished" || $2 == "failed" || $2 == "pending" || $2 == "running" || $2 == "cancelled"' "$out/log" > "$out/table"
[ "$(wc -l < "$out/table")" -eq 4 ] || fail "expected 4 tasks in the summary"
[ "$(awk '$2 == "finished" && $3 == 1' "$out/table" | wc -l)" -eq 4 ] || fail "not every task finished on its first attempt"
[ "$(awk '{print $1}' "$out/table" | sort -u | wc -l)" -eq 4 ] || fail "a task appears twice"
[ "$(awk '{print $4}' "$out/table" | sort -u | tr '\n' ' ')" = "agent-1 agent-2 " ] || fail "the tasks were not shared by agent-1 and agent-2"
[ "$(awk '{print $7}' "$out/table" | sort -u | wc -l)" -eq 4 ] || fail "the tasks did not save 4 distinct model versions"
grep -q '^models saved by this grid (grid-[0-9]*): 4$' "$out/log" || fail "the store does not hold exactly one model per task"
[ "$(grep -c '^agent agent-[12] ran 2 tasks$' "$out/log")" -eq 2 ] || fail "each agent should have run 2 tasks"

best=$(awk '{print $8}' "$out/table" | sort -g | tail -1)
line=$(grep '^evaluate: top model' "$out/log") || fail "no evaluate line"
stored=$(sed -n 's/.*stored test_accuracy \([0-9.]*\),.*/\1/p' <<< "$line")
measured=$(sed -n 's/.*measured \([0-9.]*\) on.*/\1/p' <<< "$line")
echo "best in the table: $best  stored: $stored  measured by the fresh process: $measured"
[ "$stored" = "$best" ] || fail "the top model's stored accuracy $stored is not the best of the table ($best)"
[ "$measured" = "$stored" ] || fail "the reloaded model measures $measured, stored $stored"
# 1 epoch on 3000 images gives 0.73-0.78 (chance: 0.1)
awk -v a="$measured" 'BEGIN { exit !(a > 0.6) }' || fail "accuracy $measured is not above 0.6"
echo "flow example (Fashion-MNIST): passed"
