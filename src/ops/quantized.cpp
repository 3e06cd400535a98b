#include "loom/ops/quantized.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/manipulation.h"
#include "ops/backend.h"
#include "ops/dispatch.h"

namespace loom {

QuantizedMatrix quantize_int8(const Tensor& w, int64_t group) {
  if (!w.defined() || w.ndim() != 2 || (w.dtype() != Float32 && w.dtype() != Float64))
    throw ValueError("quantize_int8: w must be a 2-d float32 or float64 matrix (K, N), got " +
                     (w.defined() ? shape_str(w.shape()) + " " + dtype_name(w.dtype()) : std::string("an undefined tensor")));
  const int64_t k = w.dim(0), n = w.dim(1);
  if (group < 0 || group > k) throw ValueError("quantize_int8: group " + std::to_string(group) + " (valid: 0 for all " + std::to_string(k) + " inputs, or 1 to " + std::to_string(k) + ")");
  if (group == 0) group = std::max<int64_t>(k, 1);
  const int64_t ng = (k + group - 1) / group;
  // outputs as rows, in double: the scale and rounding see w's values as they are
  const std::vector<double> wt = w.detach().transpose().astype(Float64).contiguous().to_vector<double>();
  std::vector<uint8_t> values(static_cast<size_t>(n * k));
  std::vector<float> scales(static_cast<size_t>(n * ng));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t k0 = g * group, k1 = std::min(k, k0 + group);
      double top = 0;
      for (int64_t i = k0; i < k1; ++i) top = std::max(top, std::abs(wt[static_cast<size_t>(j * k + i)]));
      const float scale = static_cast<float>(top / 127.0);
      scales[static_cast<size_t>(j * ng + g)] = scale;
      for (int64_t i = k0; i < k1; ++i) {
        const double v = scale > 0 ? std::round(wt[static_cast<size_t>(j * k + i)] / static_cast<double>(scale)) : 0.0;
        values[static_cast<size_t>(j * k + i)] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(v, -127.0, 127.0)));
      }
    }
  return {from_vector<uint8_t>(values, {n, k}), from_vector<float>(scales, {n, ng}), group};
}

namespace {

// The kernel's slot, declared beside its op (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/quantized.cpp: out (M, N) float32 = x (M, K) float32 times the transpose of q
// (N, K) int8, q's row j scaled by scales (N, G) over each group of `group` columns
// (G = ceil(K / group)), plus bias (N) float32 when it is defined; all contiguous
// (ops/quantized.h). Unfilled (if_filled): no int8 kernel.
constinit const detail::KernelSlot<void(const Tensor& out, const Tensor& x, const Tensor& q, const Tensor& scales,
                                        int64_t group, const Tensor& bias)>
    kMatmulInt8{"quantized.matmul_int8"};

void check(const QuantizedMatrix& q, const char* where) {
  if (!q.values.defined() || q.values.ndim() != 2 || q.values.dtype() != UInt8 || !q.scales.defined() || q.scales.ndim() != 2 ||
      q.scales.dtype() != Float32 || q.group < 1 || q.scales.dim(0) != q.values.dim(0) ||
      q.scales.dim(1) != (q.values.dim(1) + q.group - 1) / q.group)
    throw ValueError(std::string(where) + ": not a quantized matrix (values (N, K) uint8, scales (N, ceil(K / group)) float32, group >= 1)");
}

}  // namespace

Tensor dequantize(const QuantizedMatrix& q) {
  check(q, "dequantize");
  const int64_t n = q.out_features(), k = q.in_features(), ng = q.scales.dim(1);
  const std::vector<uint8_t> v = q.values.contiguous().to_vector<uint8_t>();
  const std::vector<float> s = q.scales.contiguous().to_vector<float>();
  std::vector<float> w(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i)
      w[static_cast<size_t>(i * n + j)] =
          s[static_cast<size_t>(j * ng + i / q.group)] * static_cast<float>(static_cast<int8_t>(v[static_cast<size_t>(j * k + i)]));
  return from_vector<float>(w, {k, n});
}

Tensor matmul_int8(const Tensor& x, const QuantizedMatrix& w, const Tensor& bias) {
  check(w, "matmul_int8");
  if (!x.defined() || x.ndim() < 1 || x.dtype() != Float32)
    throw ValueError("matmul_int8: x must be float32 (..., K), got " +
                     (x.defined() ? shape_str(x.shape()) + " " + dtype_name(x.dtype()) : std::string("an undefined tensor")));
  const int64_t k = w.in_features(), n = w.out_features();
  if (x.shape().back() != k)
    throw ShapeError("matmul_int8: x " + shape_str(x.shape()) + " has " + std::to_string(x.shape().back()) + " features, the matrix " +
                     std::to_string(k) + " inputs");
  if (bias.defined() && (bias.ndim() != 1 || bias.dim(0) != n || bias.dtype() != Float32 || bias.device() != x.device()))
    throw ShapeError("matmul_int8: bias " + shape_str(bias.shape()) + " " + dtype_name(bias.dtype()) + " (valid: float32 (" +
                     std::to_string(n) + "), one per output, on x's device)");
  if ((x.requires_grad() || (bias.defined() && bias.requires_grad())) && grad_enabled())
    throw ValueError("matmul_int8: not differentiable (int8 weights are for inference): call it under NoGrad or on a tensor that does not require grad");
  Shape out_shape = x.shape();
  out_shape.back() = n;
  int64_t m = 1;  // rows: x's leading dimensions (not numel / K, which is 0 for K = 0)
  for (int64_t i = 0; i + 1 < x.ndim(); ++i) m *= x.dim(i);
  Tensor out = empty(out_shape, Float32, x.device());
  if (m == 0 || n == 0) return out;
  if (k == 0) return bias.defined() ? out.copy_(broadcast_to(bias, out_shape)) : out.fill_(0);
  const auto kernel = kMatmulInt8.if_filled(x.device());
  if (!kernel) throw Error("matmul_int8: the " + x.device().str() + " backend has no int8 kernel");
  kernel(out.reshape({m, n}), x.contiguous().reshape({m, k}), w.values.contiguous(), w.scales.contiguous(), w.group,
         bias.defined() ? bias.contiguous() : bias);
  return out;
}

}  // namespace loom
