#!/usr/bin/env bash
# The main job's promise that a run is repeatable bit for bit: the same seeds trained twice on
# 2 threads (one epoch over the first 2048 training images) write the same model files, byte for
# byte, and report the same test accuracy. ctest runs it natively and capped to AVX2
# (main_job_repeatable_avx2), so an AVX-512 machine also checks the AVX2 kernels' arithmetic.
set -euo pipefail
build="$1"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for t in 1 2; do
  "$build/examples/cnn_fashion_mnist" --epochs 1 --limit 2048 --threads 2 --out "$out/t$t" > "$out/t$t.log"
done
acc1=$(grep -o 'test accuracy of the saved model: [0-9.]*' "$out/t1.log" | awk '{print $7}')
acc2=$(grep -o 'test accuracy of the saved model: [0-9.]*' "$out/t2.log" | awk '{print $7}')
echo "first run: $acc1%  second run: $acc2%  (LOOM_SIMD=${LOOM_SIMD:-native} ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-native})"
status=0
for f in fashion_cnn.safetensors fashion_cnn_flips.safetensors; do
  if ! cmp -s "$out/t1/$f" "$out/t2/$f"; then
    echo "$f differs between two runs: $(cmp "$out/t1/$f" "$out/t2/$f" | head -1)"
    status=1
  fi
done
[ -n "$acc1" ] && [ "$acc1" = "$acc2" ] || { echo "the test accuracies differ"; status=1; }
if [ $status -eq 0 ]; then echo "main job repeatable: 1 passed, 0 failed"; else echo "main job repeatable: 0 passed, 1 failed"; fi
exit $status
