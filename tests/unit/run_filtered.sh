#!/usr/bin/env bash
# run_filtered.sh FILTER BINARY...: runs the GoogleTest cases that FILTER selects in each unit-test
# binary (tests/CMakeLists.txt, loom_filtered_test), and fails when it selects none in one of them:
# a filter that matches nothing passes in GoogleTest, so a case that moved to another part's
# binary would otherwise drop out of the run unnoticed.
set -uo pipefail
filter=$1
shift
status=0
for bin in "$@"; do
  n=$("$bin" --gtest_list_tests --gtest_filter="$filter" | grep -c '^  ')
  if [ "$n" -eq 0 ]; then
    echo "run_filtered: --gtest_filter=$filter selects no test case in $bin" >&2
    status=1
    continue
  fi
  echo "run_filtered: $(basename "$bin"): $n test cases"
  "$bin" --gtest_filter="$filter" || status=1
done
exit $status
