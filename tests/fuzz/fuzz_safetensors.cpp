// safetensors: io::decode_safetensors on the bytes, and io::load_safetensors /
// load_safetensors_metadata on the same bytes as a file (their pread path is separate).
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  loom_fuzz::expect_loom_errors("safetensors", [&] {
    loom::io::Metadata meta;
    loom::io::decode_safetensors(bytes, &meta);
  });
  const loom_fuzz::MemFile file(data, size);
  loom_fuzz::expect_loom_errors("safetensors", [&] {
    loom::io::Metadata meta;
    loom::io::load_safetensors(file.path(), &meta);
  });
  loom_fuzz::expect_loom_errors("safetensors", [&] { loom::io::load_safetensors_metadata(file.path()); });
  return 0;
}
