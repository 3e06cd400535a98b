#pragma once
// Convolution layers over channels-first inputs (N, C, ...): Conv1D, Conv2D, Conv2DTranspose, with
// PyTorch's weight layouts so parameter counts and results compare one to one.
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/init.h"
#include "loom/nn/layer.h"
#include "loom/ops/conv.h"

namespace loom::nn {

struct LOOM_API ConvOptions {
  IntList stride = 1;
  ConvPadding padding = 0;  // integers, or "same" / "valid"
  IntList dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  Init weight_init = Init::he_uniform();
  Init bias_init = Init::zeros();
};

// What a Conv1D or Conv2D layer is besides its inputs and state (nn/attributes.h): one kernel
// size per spatial axis (1 for Conv1D, 2 for Conv2D), per-axis stride and dilation.
struct LOOM_API ConvAttributes {
  int64_t filters = 0;
  std::vector<int64_t> kernel_size, stride, dilation;
  ConvPadding padding = 0;
  int64_t groups = 1;
  bool bias = true;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("filters", filters, Field::sizes(1));
    visit("kernel_size", kernel_size, Field::sizes(1));
    visit("stride", stride, Field::sizes(1));
    visit("padding", padding, Field::sizes(0));
    visit("dilation", dilation, Field::sizes(1));
    visit("groups", groups, Field::sizes(1));
    visit("bias", bias);
  }
};

// (N, C_in, L) -> (N, filters, L'); weight (filters, C_in / groups, k)
class LOOM_API Conv1D : public Layer {
 public:
  Conv1D(const Layer& input, int64_t filters, int64_t kernel_size, ConvOptions options = {}, const std::string& name = "");
  Conv1D(int64_t filters, int64_t kernel_size, ConvOptions options = {}, const std::string& name = "");  // bound by its first call
};

// (N, C_in, H, W) -> (N, filters, H', W'); weight (filters, C_in / groups, kH, kW)
class LOOM_API Conv2D : public Layer {
 public:
  Conv2D(const Layer& input, int64_t filters, IntList kernel_size, ConvOptions options = {}, const std::string& name = "");
  Conv2D(int64_t filters, IntList kernel_size, ConvOptions options = {}, const std::string& name = "");  // bound by its first call
};

struct LOOM_API ConvTransposeOptions {
  IntList stride = 1;
  IntList padding = 0;
  IntList output_padding = 0;
  IntList dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  Init weight_init = Init::he_uniform();
};

// What a Conv2DTranspose layer is besides its inputs and state.
struct LOOM_API ConvTransposeAttributes {
  int64_t filters = 0, groups = 1;
  std::vector<int64_t> kernel_size, stride, padding, output_padding, dilation;
  bool bias = true;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("filters", filters, Field::sizes(1));
    visit("kernel_size", kernel_size, Field::sizes(1));
    visit("stride", stride, Field::sizes(1));
    visit("padding", padding, Field::sizes(0));
    visit("output_padding", output_padding, Field::sizes(0));
    visit("dilation", dilation, Field::sizes(1));
    visit("groups", groups, Field::sizes(1));
    visit("bias", bias);
  }
};

// weight (C_in, filters / groups, kH, kW), as torch.nn.ConvTranspose2d
class LOOM_API Conv2DTranspose : public Layer {
 public:
  Conv2DTranspose(const Layer& input, int64_t filters, IntList kernel_size, ConvTransposeOptions options = {},
                  const std::string& name = "");
};

}  // namespace loom::nn
