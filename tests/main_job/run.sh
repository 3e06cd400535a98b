#!/usr/bin/env bash
# The main job's pipeline, shortened to one epoch on the first 12,800 training images (100
# batches; the validation and test sets whole): train and save, then reload the file in a
# separate program and require the same test accuracy (and a sane level after that epoch: 82.6 %
# on the Zen 3 at the AVX2 level, 2026-12-01; 86.4 % on all 55,000 images, which took 2.7 times
# as long).
set -euo pipefail
build="$1"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$build/examples/cnn_fashion_mnist" --epochs 1 --limit 12800 --out "$out" > "$out/train.log"
trained=$(grep -o 'test accuracy of the saved model: [0-9.]*' "$out/train.log" | awk '{print $7}')
"$build/examples/evaluate_saved_model" "$out/fashion_cnn.safetensors" > "$out/eval.log"
reloaded=$(grep -o 'test accuracy [0-9.]*' "$out/eval.log" | head -1 | awk '{print $3}')
echo "trained: $trained%  reloaded: $reloaded%"
# the flip-averaged graph (the same weights applied to each image and its mirror image)
flips=$(grep -o 'its mirror image: [0-9.]*' "$out/train.log" | awk '{print $4}')
"$build/examples/evaluate_saved_model" "$out/fashion_cnn_flips.safetensors" > "$out/eval_flips.log"
flips_reloaded=$(grep -o 'test accuracy [0-9.]*' "$out/eval_flips.log" | head -1 | awk '{print $3}')
echo "flip-averaged: $flips%  reloaded: $flips_reloaded%"
if [ -z "$flips" ] || [ "$flips" != "$flips_reloaded" ]; then echo "the reloaded flip-averaged model disagrees"; exit 1; fi
test -s "$out/learning_curves.svg"
test -s "$out/history.csv"
if [ "$trained" != "$reloaded" ]; then echo "the reloaded model disagrees"; exit 1; fi
awk -v a="$trained" 'BEGIN { exit !(a >= 75.0) }' || { echo "accuracy after one epoch of 12,800 images below 75%"; exit 1; }
echo "main job pipeline: 1 passed, 0 failed"
