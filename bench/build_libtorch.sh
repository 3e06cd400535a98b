#!/usr/bin/env bash
# Configure and build the LibTorch peer benchmark (bench/libtorch_overhead.cpp)
# against the headers/libs/CMake config shipped in the PyTorch PyPI wheel.
#
#   bench/build_libtorch.sh            # build into <repo>/build-libtorch
#   BUILD_DIR=/tmp/lt bench/build_libtorch.sh
#   bench/build_libtorch.sh --run [--threads N]   # build, then run it
#
# Needs: python3 with torch installed (python3 -m pip install -r bench/requirements.txt),
# cmake >= 3.22, a C++20 compiler. No CUDA toolkit is needed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build-libtorch}"
python="${PYTHON:-python3}"

prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
abi="$("$python" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))')"
echo "torch cmake prefix: $prefix (wheel built with _GLIBCXX_USE_CXX11_ABI=$abi)" >&2

mkdir -p "$build"
# Keep git from ever picking the build tree up, whatever the repo's .gitignore says.
[ -f "$build/.gitignore" ] || echo '*' > "$build/.gitignore"

gen=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then gen=(-G Ninja); fi

# bench/libtorch/CMakeLists.txt explains why it does not use the wheel's
# TorchConfig.cmake by default (CUDA wheel + Debian's libtorch-dev 1.13).
cmake -S "$here/libtorch" -B "$build" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DLOOM_TORCH_CXX11_ABI="$abi" \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
grep -E "LibTorch from|^CMake (Warning|Error)" -A2 "$build/configure.log" | head -20 >&2 || true
cmake --build "$build" -j"${JOBS:-2}"

echo "built: $build/libtorch_overhead" >&2
if [ "${1:-}" = "--run" ]; then
  shift
  "$build/libtorch_overhead" "$@"
fi
