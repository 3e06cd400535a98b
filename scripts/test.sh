#!/usr/bin/env bash
# The whole test suite: unit tests, the reference (PyTorch) differential suite, gradient checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 1200
