#!/usr/bin/env bash
# One door to kernels (docs/architecture.md, "The op contract"): code outside src/ops/cpu reaches
# a kernel only through its device's backend table (detail::backend(device), src/ops/backend.h).
# Fails, naming file and line, where a file under src/ but outside src/ops/cpu names cpu:: or
# simd:: or includes a header from a cpu/ folder. No exception: the one registration point,
# register_cpu_backend(), is defined in src/ops/cpu/register.cpp (which runs each kernel file's
# add_<file>_kernels) and declared in backend.h.
#   check.sh SOURCE_DIR     check the tree
#   check.sh --self-test    the check on a planted tree: each kind of violation is caught
set -euo pipefail

check() {
  local src="$1/src"
  local found
  # `|| true`: grep exits 1 when it finds nothing, which is the good case
  found="$(grep -rnE 'cpu::|simd::|^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]*/)?cpu/' "$src" |
    grep -v "^$src/ops/cpu/" || true)"
  if [[ -n "$found" ]]; then
    echo "one door to kernels: outside src/ops/cpu, call kernels through detail::backend(device) (src/ops/backend.h):"
    sed "s|^$src/|src/|" <<<"$found"
    return 1
  fi
}

if [[ "${1:-}" == "--self-test" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/src/ops/cpu/simd" "$work/src/train" "$work/src/nn/cpu"
  printf '#include "ops/cpu/simd/simd.h"\nvoid k() { cpu::simd::table(); }\n' >"$work/src/ops/cpu/allowed.cpp"
  printf '// the kernels live in src/ops/cpu/adam.cpp\nvoid f() { detail::backend(d).adam_update(); }\n' >"$work/src/train/clean.cpp"
  check "$work" || { echo "self-test: a clean tree failed"; exit 1; }
  printf '#include "ops/cpu/simd/simd.h"\n' >"$work/src/train/a.cpp"
  printf 'void g() { cpu::softmax_lastdim_f32(y, x, false); }\n' >"$work/src/ops/b.cpp"
  printf 'auto t = simd::table();\n' >"$work/src/train/c.h"
  printf '#include "cpu/kernels.h"\n' >"$work/src/nn/cpu/d.cpp"
  out="$(check "$work")" && { echo "self-test: planted violations passed"; exit 1; }
  for f in src/train/a.cpp:1 src/ops/b.cpp:1 src/train/c.h:1 src/nn/cpu/d.cpp:1; do
    grep -q "^$f:" <<<"$out" || { echo "self-test: $f not reported in:"; echo "$out"; exit 1; }
  done
  grep -q allowed.cpp <<<"$out" && { echo "self-test: src/ops/cpu reported"; exit 1; }
  echo "self-test: 4 planted violations caught, src/ops/cpu and comments naming it allowed"
  exit 0
fi
check "$1"
