// IDX: data::read_idx on the bytes as a file, plain or gzip (it takes a path only; the gzip
// layer is part of what is fuzzed).
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const loom_fuzz::MemFile file(data, size);
  loom_fuzz::expect_loom_errors("idx", [&] { loom::data::read_idx(file.path()); });
  return 0;
}
