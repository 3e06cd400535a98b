// The optimizers' fused updates (Backend::sgd_update, adam_update, rmsprop_update,
// adagrad_update): one pass over a range of a parameter, no allocation, every scalar rounded to
// the parameter's dtype and the operations in the tensor-op path's order (addcmul as
// (v * t1) * t2, addcdiv as (v * t1) / t2). float32 Adam runs the vector kernel of the CPU's
// instruction set (simd::Table::adam); the rest are loops over T.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"

namespace loom::cpu {

namespace {

// The element pointer of a contiguous tensor (nullptr for an undefined one: an option that is off).
template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <typename T>
void sgd_range(const Tensor& param, const Tensor& grad, const Tensor& buf, const detail::SGDStep& s, int64_t b0,
               int64_t e0) {
  T* p = ptr<T>(param);
  const T* g = ptr<T>(grad);
  T* b = ptr<T>(buf);
  const T wd = static_cast<T>(s.weight_decay), mom = static_cast<T>(s.momentum);
  const T damp = static_cast<T>(1.0 - s.dampening), neg_lr = static_cast<T>(-s.lr);
  const bool decay = s.weight_decay != 0, use_mom = s.momentum != 0, nesterov = s.nesterov, first = s.first;
  const bool scaled = s.grad_scale != 1.0;
  const T gs = static_cast<T>(s.grad_scale);
  for (int64_t i = b0; i < e0; ++i) {
    T d = scaled ? g[i] * gs : g[i];
    if (decay) d = d + wd * p[i];
    if (use_mom) {
      const T bi = first ? d : b[i] * mom + damp * d;
      b[i] = bi;
      d = nesterov ? d + mom * bi : bi;
    }
    p[i] = p[i] + neg_lr * d;
  }
}

// float64; float32 takes the vector kernel.
void adam_range_f64(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& max_sq, const detail::AdamStep& s, int64_t b0, int64_t e0) {
  double* p = ptr<double>(param);
  const double* g = ptr<double>(grad);
  double* m = ptr<double>(exp_avg);
  double* v = ptr<double>(exp_avg_sq);
  double* vmax = ptr<double>(max_sq);
  const double omb1 = 1.0 - s.beta1, omb2 = 1.0 - s.beta2, neg_step = -s.step_size;
  const bool use_l2 = s.l2 != 0, use_decay = s.decay != 1.0, scaled = s.grad_scale != 1.0;
  for (int64_t i = b0; i < e0; ++i) {
    double pi = p[i];
    if (use_decay) pi = pi * s.decay;
    double gi = scaled ? g[i] * s.grad_scale : g[i];
    if (use_l2) gi = gi + s.l2 * pi;
    const double mi = m[i] * s.beta1 + omb1 * gi;
    const double vi = v[i] * s.beta2 + (omb2 * gi) * gi;
    m[i] = mi;
    v[i] = vi;
    double vv = vi;
    if (vmax) vmax[i] = vv = std::max(vmax[i], vi);
    p[i] = pi + (neg_step * mi) / (std::sqrt(vv) / s.bc2_sqrt + s.eps);
  }
}

template <typename T>
void rmsprop_range(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                   const Tensor& momentum_buffer, const detail::RMSPropStep& s, int64_t b0, int64_t e0) {
  T* p = ptr<T>(param);
  const T* g = ptr<T>(grad);
  T* sq = ptr<T>(square_avg);
  T* ga = ptr<T>(grad_avg);
  T* buf = ptr<T>(momentum_buffer);
  const T alpha = static_cast<T>(s.alpha), oma = static_cast<T>(1.0 - s.alpha), eps = static_cast<T>(s.eps);
  const T wd = static_cast<T>(s.weight_decay), mom = static_cast<T>(s.momentum), neg_lr = static_cast<T>(-s.lr);
  const bool decay = s.weight_decay != 0;
  for (int64_t i = b0; i < e0; ++i) {
    T gi = g[i];
    if (decay) gi = gi + wd * p[i];
    const T si = sq[i] * alpha + (oma * gi) * gi;
    sq[i] = si;
    T avg;
    if (ga) {
      const T a = ga[i] * alpha + oma * gi;
      ga[i] = a;
      avg = std::sqrt(si + (T(-1) * a) * a);
    } else {
      avg = std::sqrt(si);
    }
    avg = avg + eps;
    if (buf) {
      const T b = buf[i] * mom + gi / avg;
      buf[i] = b;
      p[i] = p[i] + neg_lr * b;
    } else {
      p[i] = p[i] + (neg_lr * gi) / avg;
    }
  }
}

template <typename T>
void adagrad_range(const Tensor& param, const Tensor& grad, const Tensor& sum, const detail::AdagradStep& s, int64_t b0,
                   int64_t e0) {
  T* p = ptr<T>(param);
  const T* g = ptr<T>(grad);
  T* acc = ptr<T>(sum);
  const T wd = static_cast<T>(s.weight_decay), eps = static_cast<T>(s.eps), neg_lr = static_cast<T>(-s.lr);
  const bool decay = s.weight_decay != 0;
  for (int64_t i = b0; i < e0; ++i) {
    T gi = g[i];
    if (decay) gi = gi + wd * p[i];
    const T si = acc[i] + gi * gi;
    acc[i] = si;
    p[i] = p[i] + (neg_lr * gi) / (std::sqrt(si) + eps);
  }
}

}  // namespace

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const detail::SGDStep& s,
                int64_t begin, int64_t end) {
  if (param.dtype() == DType::Float32) sgd_range<float>(param, grad, momentum_buffer, s, begin, end);
  else sgd_range<double>(param, grad, momentum_buffer, s, begin, end);
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const detail::AdamStep& s, int64_t begin, int64_t end) {
  if (param.dtype() != DType::Float32) {
    adam_range_f64(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, s, begin, end);
    return;
  }
  const simd::AdamArgs a{static_cast<float>(s.decay),      static_cast<float>(s.l2),
                         static_cast<float>(s.beta1),      static_cast<float>(1.0 - s.beta1),
                         static_cast<float>(s.beta2),      static_cast<float>(1.0 - s.beta2),
                         static_cast<float>(-s.step_size), static_cast<float>(s.bc2_sqrt),
                         static_cast<float>(s.eps),        static_cast<float>(s.grad_scale)};
  float* vmax = ptr<float>(max_exp_avg_sq);
  simd::table().adam(ptr<float>(param) + begin, ptr<float>(grad) + begin, ptr<float>(exp_avg) + begin,
                     ptr<float>(exp_avg_sq) + begin, vmax ? vmax + begin : nullptr, end - begin, a);
}

void rmsprop_update(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                    const Tensor& momentum_buffer, const detail::RMSPropStep& s, int64_t begin, int64_t end) {
  if (param.dtype() == DType::Float32)
    rmsprop_range<float>(param, grad, square_avg, grad_avg, momentum_buffer, s, begin, end);
  else
    rmsprop_range<double>(param, grad, square_avg, grad_avg, momentum_buffer, s, begin, end);
}

void adagrad_update(const Tensor& param, const Tensor& grad, const Tensor& sum, const detail::AdagradStep& s,
                    int64_t begin, int64_t end) {
  if (param.dtype() == DType::Float32) adagrad_range<float>(param, grad, sum, s, begin, end);
  else adagrad_range<double>(param, grad, sum, s, begin, end);
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/train/sgd.cpp, adam.cpp, rmsprop.cpp, adagrad.cpp), with its signature, which the slot checks.
void add_optimizers_kernels(detail::Backend& b) {
  b.kernels.fill("optim.sgd_update", &cpu::sgd_update);
  b.kernels.fill("optim.adam_update", &cpu::adam_update);
  b.kernels.fill("optim.rmsprop_update", &cpu::rmsprop_update);
  b.kernels.fill("optim.adagrad_update", &cpu::adagrad_update);
}

}  // namespace loom::cpu
