#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, in build-san/: scripts/sanitized_build.sh) and runs each
# for a while (docs/testing.md):
#   scripts/fuzz.sh                  every target for 25 s (CI runs scripts/fuzz.sh 15)
#   scripts/fuzz.sh 600              every target for 600 s
#   scripts/fuzz.sh 60 csv text      only the named targets
#   scripts/fuzz.sh replay [targets] runs the committed reproducers (tests/fuzz/regressions/<target>/)
#                                    once each and says which still fail
# A crash, sanitizer report, non-loom::Error exception, leak, timeout (> 10 s for one input) or
# allocation over the limits (-malloc_limit_mb=1024, -rss_limit_mb=2048) fails the run; the input
# is saved as build-san/findings/<target>/crash-* (or leak-, timeout-, oom-) and the log is
# build-san/logs/<target>.log. FUZZ_KEEP_GOING=1 keeps fuzzing after a finding (libFuzzer's fork
# mode) to collect several in one run.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(safetensors model graph_json state checkpoint npy npz idx csv text onnx image serve text_serve ui)
mode=fuzz
seconds=25
if [[ $# -gt 0 && $1 == replay ]]; then
  mode=replay
  shift
elif [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")

bash scripts/sanitized_build.sh fuzz_make_seeds $(printf 'fuzz_%s ' "${targets[@]}")

sup=tests/sanitizers
export LOOM_NUM_THREADS=1
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:suppressions=$sup/ubsan.supp:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$sup/lsan.supp:${LSAN_OPTIONS:-}"
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024)

failed=()
if [[ $mode == replay ]]; then
  for t in "${targets[@]}"; do
    for f in tests/fuzz/regressions/"$t"/*; do
      [[ -f $f ]] || continue
      if build-san/tests/fuzz/fuzz_"$t" "${limits[@]}" -runs=1 "$f" >/dev/null 2>&1; then
        echo "fixed:      $t $f"
      else
        echo "still fails: $t $f"
        failed+=("$f")
      fi
    done
  done
  [[ ${#failed[@]} -eq 0 ]] || exit 1
  exit 0
fi

rm -rf build-san/seeds
build-san/tests/fuzz/fuzz_make_seeds build-san/seeds >/dev/null
mkdir -p build-san/logs
keep=()
[[ ${FUZZ_KEEP_GOING:-0} == 1 ]] && keep=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
for t in "${targets[@]}"; do
  corpus=build-san/corpus/$t
  mkdir -p "$corpus" build-san/findings/"$t"
  # fixed findings kept as regression seeds (tests/fuzz/regressions/<target>/), when there are any
  extra=()
  [[ -d tests/fuzz/regressions/$t ]] && extra=(tests/fuzz/regressions/"$t")
  log=build-san/logs/$t.log
  before=$(ls build-san/findings/"$t" | wc -l)
  if build-san/tests/fuzz/fuzz_"$t" "${limits[@]}" "${keep[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix=build-san/findings/"$t"/ "$corpus" build-san/seeds/"$t" "${extra[@]}" >"$log" 2>&1 &&
     [[ $(ls build-san/findings/"$t" | wc -l) -eq $before ]]; then
    echo "ok       $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs, corpus $(ls "$corpus" | wc -l) files"
  else
    echo "FINDING  $t: see $log and build-san/findings/$t/"
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|escaped:' "$log" | sed 's/^/         /' || true
    failed+=("$t")
  fi
done
[[ ${#failed[@]} -eq 0 ]] || { echo "fuzz: findings in ${failed[*]}"; exit 1; }
