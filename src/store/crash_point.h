#pragma once
// Named points where a test can make the process die as if killed (SIGKILL), to check that the
// store stays consistent whatever the moment of a crash (tests/unit/store/store_kill_test.cpp). The
// point is chosen by the environment variable LOOM_STORE_CRASH_AT, read once; unset, each point
// is one comparison.
namespace loom::store::detail {

void crash_point(const char* name);

}  // namespace loom::store::detail
