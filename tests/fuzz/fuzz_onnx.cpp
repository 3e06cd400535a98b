// ONNX import: io::decode_onnx on the bytes, and io::import_onnx on the same bytes as a file
// (external data then resolves against /proc/self/fd, which the folder rules must keep it in).
// The imported graph is compiled and run once on zeros when its inputs have fixed small shapes.
#include "fuzz/fuzz_common.h"

namespace {

void run_small(const loom::Graph& g) {
  std::vector<loom::Tensor> xs;
  for (const loom::nn::Layer& in : g.inputs()) {
    loom::Shape s = in.shape();
    int64_t n = 1;
    for (int64_t& d : s) {
      if (d < 0) d = 1;
      n *= d;
      if (n > 4096) return;
    }
    xs.push_back(loom::zeros(s, in.dtype()));
  }
  g.compile().run(xs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  loom_fuzz::expect_loom_errors("onnx", [&] { run_small(loom::io::decode_onnx(bytes)); });
  const loom_fuzz::MemFile file(data, size);
  loom_fuzz::expect_loom_errors("onnx", [&] { loom::io::import_onnx(file.path()); });
  return 0;
}
