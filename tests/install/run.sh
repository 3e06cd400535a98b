#!/usr/bin/env bash
# Installs the built library into a temporary prefix, runs its `loom` command line, then
# configures, builds and runs a consumer project against it with find_package(Loom).
set -euo pipefail
build_dir="$1"; source_dir="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# each step's output is kept and shown when it fails (a failure must say why)
quiet() { "$@" >"$work/step.log" 2>&1 || { echo "install: failed: $*" >&2; cat "$work/step.log" >&2; exit 1; }; }
quiet cmake --install "$build_dir" --prefix "$work/prefix"
# the command line is installed and runs from the prefix (its RPATH finds the library)
quiet "$work/prefix/bin/loom" --help
grep -q "^usage: loom" "$work/step.log" || { echo "install: loom --help printed no usage line" >&2; exit 1; }
quiet cmake -S "$source_dir/tests/install" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/build"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer_dist"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer_store" "$work"
# A program that links only loom::loom loads none of the store's libraries, directly or through
# libloom (the store and flow are loom::store's); one that links loom::store does.
store_libs='lib(pq|sqlite3|crypto|ssl|zstd)\.so'
consumer_libs="$(LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" ldd "$work/build/consumer")"
if grep -E "$store_libs" <<<"$consumer_libs"; then
  echo "install: a program linking only loom::loom loads the store's libraries (above)" >&2
  exit 1
fi
# (read whole first: `ldd | grep -q` under pipefail fails when grep's early exit cuts ldd off)
store_consumer_libs="$(LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" ldd "$work/build/consumer_store")"
if ! grep -qE 'libpq\.so' <<<"$store_consumer_libs"; then
  echo "install: consumer_store (loom::store) does not load libpq: is the store still in loom::store?" >&2
  exit 1
fi
