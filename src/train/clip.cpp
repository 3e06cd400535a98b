// Gradient clipping by global norm and by value (torch.nn.utils.clip_grad_norm_ / _value_).
#include "loom/train/clip.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "loom/autograd/autograd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduction.h"
#include "ops/backend.h"

namespace loom::train {

namespace {

// The kernel's slot (src/ops/backend.h, KernelSlot), filled by src/ops/cpu/sum_squares.cpp: the
// sum of the squares of a contiguous float32 tensor (clip_grad_norm's 2-norm) in one read, the
// same at any thread count: float32 sums over fixed blocks of values, added in double in block
// order. Unfilled (if_filled): the caller computes it with ops.
constinit const loom::detail::KernelSlot<double(const Tensor& x)> kSumSquaresF32{"clip.sum_squares_f32"};

// The parameters' gradients, each tensor once: the engine may hand the very same gradient
// tensor to two leaves (e.g. both operands of an add), and scaling it twice would be wrong.
// A gradient that merely shares storage with another is replaced by its own copy.
std::vector<Tensor> unique_grads(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  std::set<const TensorImpl*> impls;
  std::set<const Storage*> storages;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!impls.insert(g.impl().get()).second) continue;
    if (!storages.insert(g.storage().get()).second) {
      g = g.copy();
      p.impl()->grad = g.impl();
      impls.insert(g.impl().get());
      storages.insert(g.storage().get());
    }
    out.push_back(g);
  }
  return out;
}

// All gradients in order, duplicates included (for the norm).
std::vector<Tensor> all_grads(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) out.push_back(p.grad());
  return out;
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGrad off;
  const double total = total_grad_norm(params, norm_type, error_if_nonfinite);
  const double coef = std::min(max_norm / (total + 1e-6), 1.0);
  for (Tensor& g : unique_grads(params)) g *= coef;
  return total;
}

double total_grad_norm(const std::vector<Tensor>& params, double norm_type, bool error_if_nonfinite) {
  NoGrad off;
  std::vector<Tensor> grads = all_grads(params);
  if (grads.empty()) return 0.0;
  double total = 0.0;
  if (std::isinf(norm_type)) {
    for (const Tensor& g : grads)
      if (g.numel() > 0) total = std::max(total, max(abs(g.astype(DType::Float64))).item<double>());
  } else {
    if (!(norm_type > 0)) throw ValueError("clip_grad_norm: norm_type must be > 0 or infinity, got " + std::to_string(norm_type));
    // torch.norm(stack([norm(g) for g in grads]), p): per-gradient norms, then their norm
    for (const Tensor& g : grads) {
      if (g.numel() == 0) continue;
      // float32 2-norms in float32, as torch.nn.utils.clip_grad_norm_ (two float64 copies of
      // every gradient were 8 % of the PTB LSTM step), in one read where the gradient is
      // contiguous and its device's backend has the kernel; other norms and dtypes in float64
      const auto sum_squares_f32 = kSumSquaresF32.if_filled(g.device());
      if (norm_type == 2.0 && g.dtype() == DType::Float32 && g.is_contiguous() && sum_squares_f32) {
        total += sum_squares_f32(g);
        continue;
      }
      const Tensor a = norm_type == 2.0 && g.dtype() == DType::Float32 ? g : g.astype(DType::Float64);
      double n;
      if (norm_type == 2.0) n = std::sqrt(sum(square(a)).item<double>());  // squares need no abs pass
      else if (norm_type == 1.0) n = sum(abs(a)).item<double>();
      else n = std::pow(sum(power(abs(a), norm_type)).item<double>(), 1.0 / norm_type);
      total += norm_type == 1.0 ? n : std::pow(n, norm_type);
    }
    if (norm_type == 2.0) total = std::sqrt(total);
    else if (norm_type != 1.0) total = std::pow(total, 1.0 / norm_type);
  }
  if (error_if_nonfinite && !std::isfinite(total))
    throw ValueError("clip_grad_norm: the total norm of order " + std::to_string(norm_type) +
                     " of the gradients is non-finite, so it cannot be clipped (error_if_nonfinite = true)");
  return total;
}

void clip_grad_value(const std::vector<Tensor>& params, double value) {
  NoGrad off;
  if (!(value >= 0)) throw ValueError("clip_grad_value: value must be >= 0, got " + std::to_string(value));
  for (Tensor& g : unique_grads(params)) g.copy_(clip(g, -value, value));
}

}  // namespace loom::train
