// State files: io::load_state into a fixed graph (loom_fuzz::Net, whose saved state and model
// files are the seeds).
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loom_fuzz::Net net;
  const loom_fuzz::MemFile file(data, size);
  loom_fuzz::expect_loom_errors("state", [&] { loom::io::load_state(file.path(), net.graph); });
  return 0;
}
