#!/usr/bin/env bash
# Installs the built library into a temporary prefix, runs its `loom` command line, then
# configures, builds and runs a consumer project against it with find_package(Loom).
set -euo pipefail
build_dir="$1"; source_dir="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# the command line is installed and runs from the prefix (its RPATH finds the library)
"$work/prefix/bin/loom" --help | grep "^usage: loom" >/dev/null
cmake -S "$source_dir/tests/install" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer_dist"
