#include "loom/nn/adaptive_pool.h"

#include <vector>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/pooling.h"
#include "loom/ops/reduction.h"
#include "nn/register_kinds.h"

namespace loom::nn {

namespace {

std::vector<int64_t> out_hw(const IntList& size, const char* where) {
  const auto& v = size.values();
  std::vector<int64_t> hw;
  if (v.size() == 1) hw = {v[0], v[0]};
  else if (v.size() == 2) hw = v;
  else throw ValueError(std::string(where) + ": output_size must give 1 or 2 values, got " + std::to_string(v.size()));
  if (hw[0] <= 0 || hw[1] <= 0)
    throw ValueError(std::string(where) + ": output_size must be positive, got (" + std::to_string(hw[0]) + ", " +
                     std::to_string(hw[1]) + ")");
  return hw;
}

struct AdaptiveAvgPoolImpl final : LayerBase<AdaptiveAvgPoolImpl> {
  bool pure() const override { return true; }
  int64_t oh = 1, ow = 1;
  const char* kind() const override { return "AdaptiveAvgPool2D"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return adaptive_avg_pool2d(in[0], {oh, ow}); }
  Options options() const override { return Options().set_ints("output_size", {oh, ow}); }
};

}  // namespace

Tensor adaptive_avg_pool_matrix(int64_t in_size, int64_t out_size, DType dtype, Device device) {
  std::vector<double> m(static_cast<size_t>(out_size * in_size), 0.0);
  for (int64_t i = 0; i < out_size; ++i) {
    const int64_t start = (i * in_size) / out_size;                           // floor(i * in / out)
    const int64_t end = ((i + 1) * in_size + out_size - 1) / out_size;       // ceil((i + 1) * in / out)
    for (int64_t k = start; k < end; ++k) m[static_cast<size_t>(i * in_size + k)] = 1.0 / static_cast<double>(end - start);
  }
  return astype(from_vector(m, Shape{out_size, in_size}, device), dtype);
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size) {
  if (x.ndim() != 3 && x.ndim() != 4)
    throw ShapeError("adaptive_avg_pool2d: input has shape " + shape_str(x.shape()) + " (valid: (N, C, H, W) or (C, H, W))");
  const auto hw = out_hw(output_size, "adaptive_avg_pool2d");
  const int64_t H = x.shape()[x.ndim() - 2], W = x.shape()[x.ndim() - 1];
  if (H <= 0 || W <= 0) throw ShapeError("adaptive_avg_pool2d: input has an empty plane, shape " + shape_str(x.shape()));
  const int64_t oh = hw[0], ow = hw[1];
  if (oh == 1 && ow == 1) return mean(x, {-2, -1}, /*keepdims=*/true);
  if (H % oh == 0 && W % ow == 0) {
    if (H == oh && W == ow) return x;
    return avg_pool2d(x, {H / oh, W / ow});
  }
  // Separable: the bins are rectangles, so averaging rows then columns is the bin average.
  Tensor rows = adaptive_avg_pool_matrix(H, oh, x.dtype(), x.device());                // (oh, H)
  Tensor cols = transpose(adaptive_avg_pool_matrix(W, ow, x.dtype(), x.device()));     // (W, ow)
  return matmul(matmul(rows, x), cols);
}

AdaptiveAvgPool2D::AdaptiveAvgPool2D(const Layer& input, IntList output_size, const std::string& name) {
  const char* kind = "AdaptiveAvgPool2D";
  if (!input.defined()) throw ValueError(std::string(kind) + ": the input layer is undefined");
  if (input.shape().size() != 4)
    throw ShapeError(std::string(kind) + ": input '" + input.name() + "' has shape " + shape_str(input.shape()) +
                     " (valid: (batch, channels, height, width))");
  const auto hw = out_hw(output_size, kind);
  auto impl = std::make_shared<AdaptiveAvgPoolImpl>();
  impl->oh = hw[0];
  impl->ow = hw[1];
  impl->inputs = {input};
  impl->shape = {input.shape()[0], input.shape()[1], hw[0], hw[1]};
  impl->dtype = input.dtype();
  impl->name = unique_name("adaptive_avg_pool", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_adaptive_pool_layers(AddKind add) {
  add("AdaptiveAvgPool2D", [](const LayerSpec& s) -> Layer {
    return AdaptiveAvgPool2D(s.input(), IntList(s.options.get_ints("output_size", 1, int64_t{1} << 40)), s.name);
  });
}

}  // namespace loom::nn
