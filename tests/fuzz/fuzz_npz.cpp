// NPZ: data::npz_from_bytes (ZIP with stored and deflated .npy members; load_npz is read_file +
// the same parser).
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  loom_fuzz::expect_loom_errors("npz", [&] { loom::data::npz_from_bytes(bytes); });
  return 0;
}
