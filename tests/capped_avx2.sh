#!/usr/bin/env bash
# Runs a test's command capped to AVX2, as on an AVX2-only machine (a Zen 3): Loom's kernels,
# oneDNN and OpenBLAS at that level. The *_avx2 tests are twins of uncapped ones; when the whole
# run already has these caps (CI's bare-Debian stage runs the suite so), a twin would repeat its
# uncapped test exactly, so it is skipped (77, the tests' SKIP_RETURN_CODE) and says why.
#   bash tests/capped_avx2.sh COMMAND [ARGS...]
set -euo pipefail
if [[ "${LOOM_SIMD:-}" == avx2 && "${ONEDNN_MAX_CPU_ISA:-}" == AVX2 && "${OPENBLAS_CORETYPE:-}" == Haswell ]]; then
  echo "skipped: the whole run is already capped to AVX2 (LOOM_SIMD=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell), so the uncapped twin of this test ran exactly this"
  exit 77
fi
export LOOM_SIMD=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell
exec "$@"
