#!/usr/bin/env bash
# The main job: trains a CNN on Fashion-MNIST with a progress bar, saves it, reloads it in a
# fresh process and reports the reloaded model's test accuracy; writes the learning curves.
# Outputs go to ./main-job (model, learning_curves.svg, history.csv).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/examples/cnn_fashion_mnist --out main-job "$@"
./build/examples/evaluate_saved_model main-job/fashion_cnn.safetensors
./build/examples/evaluate_saved_model main-job/fashion_cnn_flips.safetensors
