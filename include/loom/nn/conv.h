#pragma once
// Convolution layers over channels-first inputs (N, C, ...): Conv1D, Conv2D, Conv2DTranspose, with
// PyTorch's weight layouts so parameter counts and results compare one to one.
#include <string>

#include "loom/nn/init.h"
#include "loom/nn/layer.h"
#include "loom/ops/conv.h"

namespace loom::nn {

struct ConvOptions {
  IntList stride = 1;
  ConvPadding padding = 0;  // integers, or "same" / "valid"
  IntList dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  Init weight_init = Init::he_uniform();
  Init bias_init = Init::zeros();
};

// (N, C_in, L) -> (N, filters, L'); weight (filters, C_in / groups, k)
class Conv1D : public Layer {
 public:
  Conv1D(const Layer& input, int64_t filters, int64_t kernel_size, ConvOptions options = {}, const std::string& name = "");
  Conv1D(int64_t filters, int64_t kernel_size, ConvOptions options = {}, const std::string& name = "");  // bound by its first call
};

// (N, C_in, H, W) -> (N, filters, H', W'); weight (filters, C_in / groups, kH, kW)
class Conv2D : public Layer {
 public:
  Conv2D(const Layer& input, int64_t filters, IntList kernel_size, ConvOptions options = {}, const std::string& name = "");
  Conv2D(int64_t filters, IntList kernel_size, ConvOptions options = {}, const std::string& name = "");  // bound by its first call
};

struct ConvTransposeOptions {
  IntList stride = 1;
  IntList padding = 0;
  IntList output_padding = 0;
  IntList dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  Init weight_init = Init::he_uniform();
};

// weight (C_in, filters / groups, kH, kW), as torch.nn.ConvTranspose2d
class Conv2DTranspose : public Layer {
 public:
  Conv2DTranspose(const Layer& input, int64_t filters, IntList kernel_size, ConvTransposeOptions options = {},
                  const std::string& name = "");
};

}  // namespace loom::nn
