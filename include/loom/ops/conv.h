#pragma once
// Convolutions over channels-first tensors with PyTorch's weight layouts:
//   conv1d            x (N, C_in, L),    weight (C_out, C_in / groups, kL)
//   conv2d            x (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW)
//   conv2d_transpose  x (N, C_in, H, W), weight (C_in, C_out / groups, kH, kW)
//                     (torch.nn.functional.conv_transpose2d)
// bias, when defined, has shape (C_out,). All are differentiable in x, weight and bias (the
// backward rules are themselves recorded convolutions). float32 runs on oneDNN, float64 on
// plain im2col + GEMM kernels (docs/nn_ops.md).
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// One integer per spatial axis, or a single integer for all of them: 2, {2, 3}.
class LOOM_API IntList {
 public:
  IntList() = default;  // empty: "the default" where an op documents one
  IntList(int64_t v) : v_{v} {}
  IntList(int v) : v_{static_cast<int64_t>(v)} {}
  IntList(std::initializer_list<int64_t> v) : v_(v) {}
  IntList(std::vector<int64_t> v) : v_(std::move(v)) {}
  const std::vector<int64_t>& values() const { return v_; }

 private:
  std::vector<int64_t> v_;
};

// Convolution padding: zeros added on each side of the spatial axes.
//   an integer: that many on both sides of every axis;
//   one integer per axis: symmetric per axis (PyTorch's padding=(ph, pw));
//   two integers per axis: {before_0, after_0, before_1, after_1, ...} (asymmetric);
//   "valid": none; "same": output size = input size (stride 1 only; an odd total puts the
//   extra zero after, as PyTorch does).
class LOOM_API ConvPadding {
 public:
  ConvPadding(int64_t v) : values_{v} {}
  ConvPadding(int v) : values_{static_cast<int64_t>(v)} {}
  ConvPadding(std::initializer_list<int64_t> v) : values_(v) {}
  ConvPadding(std::vector<int64_t> v) : values_(std::move(v)) {}
  ConvPadding(const char* mode) : mode_(mode) {}
  ConvPadding(std::string mode) : mode_(std::move(mode)) {}
  const std::vector<int64_t>& values() const { return values_; }
  const std::string& mode() const { return mode_; }  // empty when given as integers

 private:
  std::vector<int64_t> values_;
  std::string mode_;
};

LOOM_API Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), IntList stride = 1,
              ConvPadding padding = 0, IntList dilation = 1, int64_t groups = 1);

// The output extent of a convolution along one axis, the rule conv1d/conv2d and the Conv layers
// share: floor((in + padding_before + padding_after - dilation * (kernel - 1) - 1) / stride) + 1,
// or 0 when the kernel does not fit the padded input. Exact for any int64 arguments (kernel,
// stride, dilation >= 1), saturating at INT64_MAX.
LOOM_API int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride = 1, int64_t padding_before = 0, int64_t padding_after = 0,
                         int64_t dilation = 1);
// The zeros a convolution adds, (before, after) per spatial axis: the one rule conv1d/conv2d and
// the Conv layers (and through them the ONNX exporter) share. "valid" adds none; "same" (stride 1
// only) adds dilation * (kernel - 1) in all, the odd one after, as PyTorch; values are 1 for every
// axis, one per axis, or (before, after) per axis, each in [0, 2^31]. ValueError naming `op`
// otherwise. `kernel`, `dilation` and `stride` have one value per spatial axis.
LOOM_API std::vector<std::pair<int64_t, int64_t>> conv_padding(const char* op, const ConvPadding& padding,
                                                               const std::vector<int64_t>& kernel,
                                                               const std::vector<int64_t>& dilation,
                                                               const std::vector<int64_t>& stride);
LOOM_API Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), IntList stride = 1,
              ConvPadding padding = 0, IntList dilation = 1, int64_t groups = 1);
// The adjoint (gradient) of conv2d with respect to its input, plus bias. Output size per axis:
// (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1, where
// output_padding must be smaller than stride or dilation (as PyTorch).
LOOM_API Tensor conv2d_transpose(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), IntList stride = 1,
                        IntList padding = 0, IntList output_padding = 0, int64_t groups = 1, IntList dilation = 1);

}  // namespace loom
