#!/usr/bin/env bash
# The main job: trains a model on Fashion-MNIST and reports its test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/examples/mlp_fashion_mnist "$@"
