#!/usr/bin/env bash
# Configures and builds build-san/: clang, -O1 -g, AddressSanitizer + UndefinedBehaviorSanitizer
# and libFuzzer's coverage instrumentation, with the test suite and the fuzz targets. One build
# serves scripts/sanitize.sh and scripts/fuzz.sh (docs/testing.md). Arguments: ninja targets
# (none: everything). Without the Python module: a Python process cannot load an AddressSanitizer
# runtime after its start (docs/python.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --sanitizers
CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DLOOM_BUILD_FUZZ=ON -DLOOM_BUILD_BENCH=OFF -DLOOM_PYTHON=OFF >/dev/null
targets=()
[[ $# -gt 0 ]] && targets=(--target "$@")
cmake --build build-san -j "$(nproc)" "${targets[@]}"
