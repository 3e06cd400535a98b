#pragma once
// Convolution, pooling and normalization layers over channels-first inputs (N, C, ...), with
// PyTorch's weight layouts so parameter counts and results compare one to one.
#include "loom/nn/layers.h"
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

struct PoolOptions {
  IntList stride = {};  // default: the kernel size
  IntList padding = 0;
  bool ceil_mode = false;
};

class MaxPool2D : public Layer {
 public:
  MaxPool2D(const Layer& input, IntList kernel_size, PoolOptions options = {}, const std::string& name = "");
  explicit MaxPool2D(IntList kernel_size, PoolOptions options = {}, const std::string& name = "");  // bound by its first call
};

class AvgPool2D : public Layer {
 public:
  AvgPool2D(const Layer& input, IntList kernel_size, PoolOptions options = {}, const std::string& name = "");
  explicit AvgPool2D(IntList kernel_size, PoolOptions options = {}, const std::string& name = "");  // bound by its first call
};

// Averages (or takes the maximum) over all spatial positions: (N, C, ...) -> (N, C).
class GlobalPool : public Layer {
 public:
  enum class Mode : uint8_t { Avg, Max };
  explicit GlobalPool(const Layer& input, Mode mode = Mode::Avg, const std::string& name = "");
  explicit GlobalPool(Mode mode = Mode::Avg, const std::string& name = "");  // bound by its first call
};

struct BatchNormOptions {
  double momentum = 0.1;
  double eps = 1e-5;
  bool affine = true;  // learnable weight (ones) and bias (zeros)
  // Synchronized: in Train mode the batch statistics are those of the whole batch across the
  // data-parallel replicas (nn/replicas.h, installed by loom::dist), not of this process's part.
  bool sync = false;
};

// Normalizes over axis 1 with batch statistics in Train mode (updating the running averages)
// and the running averages in Eval mode; buffers "running_mean" and "running_var".
class BatchNorm : public Layer {
 public:
  BatchNorm(const Layer& input, BatchNormOptions options = {}, const std::string& name = "");
  explicit BatchNorm(BatchNormOptions options = {}, const std::string& name = "");  // bound by its first call
};

// Makes every BatchNorm layer among `layers` synchronized (or not): returns how many there
// are. loom/graph/graph.h adds the form that takes a whole graph.
int64_t sync_batch_norm(const std::vector<Layer>& layers, bool sync = true);

// Normalizes over the last axis (n_units), with learnable weight and bias.
class LayerNorm : public Layer {
 public:
  LayerNorm(const Layer& input, double eps = 1e-5, const std::string& name = "");
  explicit LayerNorm(double eps = 1e-5, const std::string& name = "");  // bound by its first call
};

}  // namespace loom::nn
