#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang, -O1 -g, in
# build-san/, scripts/sanitized_build.sh): every ctest test except those named below (docs/testing.md). Any sanitizer report
# fails the test that triggered it. Extra arguments go to ctest (e.g. -R Csv).
#   scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/sanitized_build.sh

sup="$PWD/tests/sanitizers"
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:suppressions=$sup/ubsan.supp:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$sup/lsan.supp:${LSAN_OPTIONS:-}"
# Not run here:
# - install_find_package: it builds a consumer program with the system compiler against the
#   installed, instrumented libloom.so, which would need the sanitizer runtime in that consumer
#   too; it checks packaging, which the plain build covers.
# - example_dcgan_short, example_char_lstm_short, main_job_repeatable(_avx2): hundreds of
#   training steps through layers the unit tests and the other examples run here too, and
#   results (a learned image mean, an entropy, byte-identical files) the plain build checks.
#   Under the sanitizers they took 570, 341 and 2 x 147 s on the 2-core Zen 3, a third of the
#   stage's test time.
cd build-san
ctest --output-on-failure -j "$(nproc)" --timeout 1800 \
  -E '^(install_find_package|doc_snippets|example_dcgan_short|example_char_lstm_short|main_job_repeatable|main_job_repeatable_avx2)$' "$@"
