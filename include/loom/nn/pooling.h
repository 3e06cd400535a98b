#pragma once
// Pooling layers over channels-first inputs (N, C, H, W): MaxPool2D, AvgPool2D, GlobalPool and adaptive
// average pooling (AdaptiveAvgPool2D, adaptive_avg_pool2d, adaptive_avg_pool_matrix).
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"
#include "loom/ops/conv.h"  // IntList

namespace loom::nn {

struct LOOM_API PoolOptions {
  IntList stride = {};  // default: the kernel size
  IntList padding = 0;
  bool ceil_mode = false;
};

// What a MaxPool2D or AvgPool2D layer is besides its input (nn/attributes.h): per-axis sizes.
struct LOOM_API PoolAttributes {
  bool max = true;  // MaxPool2D or AvgPool2D: the kind says which, so it is not a saved field
  std::vector<int64_t> kernel_size, stride, padding;
  bool ceil_mode = false;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("kernel_size", kernel_size, Field::sizes(1));
    visit("stride", stride, Field::sizes(1));
    visit("padding", padding, Field::sizes(0));
    visit("ceil_mode", ceil_mode);
  }
};

class LOOM_API MaxPool2D : public Layer {
 public:
  MaxPool2D(const Layer& input, IntList kernel_size, PoolOptions options = {}, const std::string& name = "");
  explicit MaxPool2D(IntList kernel_size, PoolOptions options = {}, const std::string& name = "");  // bound by its first call
};

class LOOM_API AvgPool2D : public Layer {
 public:
  AvgPool2D(const Layer& input, IntList kernel_size, PoolOptions options = {}, const std::string& name = "");
  explicit AvgPool2D(IntList kernel_size, PoolOptions options = {}, const std::string& name = "");  // bound by its first call
};

// What a GlobalPool layer is besides its input, read by type (attributes_of): the maximum or the
// average. Saved by the kind's own options() as "mode" ("max" / "avg"), an enum nn/attributes.h
// has no field type for.
struct LOOM_API GlobalPoolAttributes {
  bool max = false;
};

// Averages (or takes the maximum) over all spatial positions: (N, C, ...) -> (N, C).
class LOOM_API GlobalPool : public Layer {
 public:
  enum class Mode : uint8_t { Avg, Max };
  explicit GlobalPool(const Layer& input, Mode mode = Mode::Avg, const std::string& name = "");
  explicit GlobalPool(Mode mode = Mode::Avg, const std::string& name = "");  // bound by its first call
};

// Adaptive average pooling (torch.nn.AdaptiveAvgPool2d): (N, C, H, W) -> (N, C, oh, ow) for any
// H, W. Output cell (i, j) averages rows [floor(i*H/oh), ceil((i+1)*H/oh)) and columns
// [floor(j*W/ow), ceil((j+1)*W/ow)) -- PyTorch's start/end index formula, so bins may overlap
// (when the output is larger than the input, cells repeat input values).

// The (out, in) matrix whose row i averages the input positions of output bin i.
LOOM_API Tensor adaptive_avg_pool_matrix(int64_t in_size, int64_t out_size, DType dtype = Float32, Device device = default_device());

// Adaptive average pooling of a (N, C, H, W) or (C, H, W) tensor to `output_size` (one value
// for a square output, or {oh, ow}); differentiable. Uses avg_pool2d when the sizes divide
// evenly and two small matrix products (rows, then columns) otherwise.
LOOM_API Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size);

// What an AdaptiveAvgPool2D layer is besides its input (nn/attributes.h): {oh, ow}.
struct LOOM_API AdaptiveAvgPoolAttributes {
  std::vector<int64_t> output_size{1, 1};
  template <class Visit>
  void fields(Visit&& visit) {
    visit("output_size", output_size, Field::sizes(1));
  }
};

// Shape rule: (N, C, H, W) -> (N, C, oh, ow) for any N, C, H and W.
class LOOM_API AdaptiveAvgPool2D : public Layer {
 public:
  AdaptiveAvgPool2D(const Layer& input, IntList output_size, const std::string& name = "");
};

}  // namespace loom::nn
