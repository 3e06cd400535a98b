// The dist tests' main: one dist::Context for the whole run (MPI cannot be initialized twice),
// results printed by rank 0, and any failure on any rank aborts the whole job at once (through
// MPI_Abort), so that the other ranks never wait in a collective the failed rank will not make.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "dist/comm.h"
#include "loom/dist/dist.h"

namespace {
class AbortOnFailure : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "rank %d: %s:%d: %s\nrank %d: aborting the job\n", loom::dist::rank(),
                 result.file_name() ? result.file_name() : "?", result.line_number(), result.message(),
                 loom::dist::rank());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
};
}  // namespace

// Before any Context: every call names the missing Context (checked here, once per run, since a
// process can initialize MPI only once).
bool refuses_without_context() {
  if (loom::dist::is_initialized()) return false;
  for (auto call : {+[] { loom::dist::rank(); }, +[] { loom::dist::barrier(); }}) {
    try {
      call();
      return false;
    } catch (const loom::dist::DistError& e) {
      if (std::string(e.what()).find("no dist::Context is alive") == std::string::npos) return false;
    }
  }
  return true;
}

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (!refuses_without_context()) {
    std::fprintf(stderr, "dist: a call without a Context did not throw the expected DistError\n");
    return 1;
  }
  loom::dist::Context dist;
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (dist.rank() != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new AbortOnFailure);
  return RUN_ALL_TESTS();
}
