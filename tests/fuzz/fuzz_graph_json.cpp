// The architecture alone: graph_from_json on the text (a model file's "loom.graph" metadata),
// then graph_to_json of the graph it built.
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  loom_fuzz::expect_loom_errors("graph_json", [&] { loom::graph_to_json(loom::graph_from_json(text)); });
  return 0;
}
