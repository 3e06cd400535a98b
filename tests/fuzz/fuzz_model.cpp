// Model files: io::load_model (safetensors + the architecture JSON through graph_from_json +
// the weights), then graph_to_json of what loaded.
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const loom_fuzz::MemFile file(data, size);
  loom_fuzz::expect_loom_errors("model", [&] {
    loom::io::Checkpoint rest;
    loom::Graph g = loom::io::load_model(file.path(), &rest);
    loom::graph_to_json(g);
  });
  return 0;
}
