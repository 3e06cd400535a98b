// Fused training-mode batch norm: passes over each channel forward (the statistics, then the
// normalized output) and backward (the two per-channel sums, then the input gradient), float32
// on the vector kernels of the CPU's ISA (simd.h),
// instead of the dozen passes of the composite. Channels are split over the pool; sums
// accumulate in double.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/cpu/loops.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/row_sums.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

struct Geometry {
  int64_t n = 1, c = 1, s = 1;  // x as (N, C, S)
};

Geometry geometry(const Tensor& x) {
  Geometry g;
  g.n = x.shape()[0];
  g.c = x.shape()[1];
  for (int64_t i = 2; i < x.ndim(); ++i) g.s *= x.shape()[i];
  return g;
}

using row_sums::opt;

// s[0] += sum (x - m), s[1] += sum (x - m)^2 over one run: float32 on the vector kernels,
// float64 on row_sums' loops.
template <typename T>
void centred_sums(const T* x, int64_t n, T m, double* s) {
  if constexpr (std::is_same_v<T, float>) {
    simd::table().centred_sums(x, n, m, s);
  } else {
    double s1, s2;
    row_sums::row_centred(x, n, m, s1, s2);
    s[0] += s1;
    s[1] += s2;
  }
}

// s[0] += sum g, s[1] += sum g (x - m) over one run.
template <typename T>
void grad_sums(const T* x, const T* g, int64_t n, T m, double* s) {
  if constexpr (std::is_same_v<T, float>) {
    simd::table().grad_sums(x, g, n, m, s);
  } else {
    double sd, sg, sgd;
    row_sums::row_grad_sums(x, g, static_cast<const T*>(nullptr), n, m, sd, sg, sgd);
    s[0] += sg;
    s[1] += sgd;
  }
}

// y = x * scale + shift over channel c's runs.
template <typename T>
void scale_shift_channel(const Geometry& g, int64_t c, const T* xp, T* yp, T scale, T shift) {
  for (int64_t n = 0; n < g.n; ++n) {
    const T* row = xp + (n * g.c + c) * g.s;
    T* out = yp + (n * g.c + c) * g.s;
    if constexpr (std::is_same_v<T, float>)
      simd::table().scale_shift(out, row, g.s, scale, shift);
    else
      for (int64_t k = 0; k < g.s; ++k) out[k] = row[k] * scale + shift;
  }
}

// gx = g * k1 - k2 - (x - m) * k3 over channel c's runs.
template <typename T>
void input_grad_channel(const Geometry& g, int64_t c, const T* xp, const T* gp, T* gxp, T k1, T k2, T m, T k3) {
  for (int64_t n = 0; n < g.n; ++n) {
    const T* row = xp + (n * g.c + c) * g.s;
    const T* grow = gp + (n * g.c + c) * g.s;
    T* out = gxp + (n * g.c + c) * g.s;
    if constexpr (std::is_same_v<T, float>)
      simd::table().batch_norm_input_grad(out, grow, row, g.s, k1, k2, m, k3);
    else
      for (int64_t k = 0; k < g.s; ++k) out[k] = grow[k] * k1 - k2 - (row[k] - m) * k3;
  }
}

}  // namespace

void batch_norm_train(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, double eps) {
  const Geometry g = geometry(x);
  detail::dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    T* mp = mean.data<T>();
    T* vp = var.data<T>();
    const T* wp = opt<T>(weight);
    const T* bp = opt<T>(bias);
    const double count = static_cast<double>(g.n * g.s);
    parallel_for(0, g.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        // the mean, then the sum of squares about it (a second pass keeps large means exact)
        double s[2] = {0, 0};
        for (int64_t n = 0; n < g.n; ++n) centred_sums<T>(xp + (n * g.c + c) * g.s, g.s, T(0), s);
        const double mu = s[0] / count;
        double d[2] = {0, 0};
        for (int64_t n = 0; n < g.n; ++n) centred_sums<T>(xp + (n * g.c + c) * g.s, g.s, static_cast<T>(mu), d);
        // about the rounded mean: correct by the residual mean d[0] / count
        const double sq = std::max(0.0, d[1] - d[0] * d[0] / count);
        const double inv = 1.0 / std::sqrt(sq / count + eps);
        mp[c] = static_cast<T>(mu);
        vp[c] = static_cast<T>(sq / count);
        // y = x * scale + shift with the affine folded in
        const T scale = static_cast<T>(inv * (wp ? static_cast<double>(wp[c]) : 1.0));
        const T shift = static_cast<T>((bp ? static_cast<double>(bp[c]) : 0.0) - mu * static_cast<double>(scale));
        scale_shift_channel<T>(g, c, xp, yp, scale, shift);
      }
    });
  });
}

void batch_norm_backward(const Tensor& gx, const Tensor& gweight, const Tensor& gbias, const Tensor& gy, const Tensor& x,
                         const Tensor& mean, const Tensor& var, const Tensor& weight, double eps) {
  const Geometry g = geometry(x);
  detail::dispatch_float(x.dtype(), "batch_norm backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* gp = gy.data<T>();
    const T* mp = mean.data<T>();
    const T* vp = var.data<T>();
    const T* wp = opt<T>(weight);
    T* gxp = gx.defined() ? gx.data<T>() : nullptr;
    T* gwp = gweight.defined() ? gweight.data<T>() : nullptr;
    T* gbp = gbias.defined() ? gbias.data<T>() : nullptr;
    const double count = static_cast<double>(g.n * g.s);
    parallel_for(0, g.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const double mu = mp[c], inv = 1.0 / std::sqrt(static_cast<double>(vp[c]) + eps);
        double sums[2] = {0, 0};  // sum g and sum g * (x - mean)
        for (int64_t n = 0; n < g.n; ++n)
          grad_sums<T>(xp + (n * g.c + c) * g.s, gp + (n * g.c + c) * g.s, g.s, static_cast<T>(mu), sums);
        const double sum_g = sums[0], sum_gx = sums[1];
        const double sum_gxhat = sum_gx * inv;
        if (gwp) gwp[c] = static_cast<T>(sum_gxhat);
        if (gbp) gbp[c] = static_cast<T>(sum_g);
        if (!gxp) continue;
        // gx = w * inv / M * (M g - sum g - xhat * sum(g xhat))
        const double w = wp ? static_cast<double>(wp[c]) : 1.0;
        const T k1 = static_cast<T>(w * inv);
        const T k2 = static_cast<T>(w * inv * sum_g / count);
        const T k3 = static_cast<T>(w * inv * inv * inv * sum_gx / count);  // times (x - mean)
        input_grad_channel<T>(g, c, xp, gp, gxp, k1, k2, static_cast<T>(mu), k3);
      }
    });
  });
}

// ---- the same in parts, for statistics reduced across replicas in between

void batch_norm_sums(const Tensor& sums, const Tensor& x) {
  const Geometry g = geometry(x);
  double* out = sums.data<double>();
  const double count = static_cast<double>(g.n * g.s);
  out[2 * g.c] = count;
  detail::dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    parallel_for(0, g.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double s[2] = {0, 0};  // as batch_norm_train: the mean, then the squares about it
        for (int64_t n = 0; n < g.n; ++n) centred_sums<T>(xp + (n * g.c + c) * g.s, g.s, T(0), s);
        const double mu = s[0] / count;
        double d[2] = {0, 0};
        for (int64_t n = 0; n < g.n; ++n) centred_sums<T>(xp + (n * g.c + c) * g.s, g.s, static_cast<T>(mu), d);
        const double m2 = std::max(0.0, d[1] - d[0] * d[0] / count);
        out[c] = s[0];
        out[g.c + c] = m2 + count * mu * mu;
      }
    });
  });
}

void batch_norm_apply(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                      const Tensor& bias, double eps) {
  const Geometry g = geometry(x);
  const double* mp = mean.data<double>();
  const double* vp = var.data<double>();
  detail::dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    const T* wp = opt<T>(weight);
    const T* bp = opt<T>(bias);
    parallel_for(0, g.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const double inv = 1.0 / std::sqrt(vp[c] + eps);
        const T scale = static_cast<T>(inv * (wp ? static_cast<double>(wp[c]) : 1.0));
        const T shift = static_cast<T>((bp ? static_cast<double>(bp[c]) : 0.0) - mp[c] * static_cast<double>(scale));
        scale_shift_channel<T>(g, c, xp, yp, scale, shift);
      }
    });
  });
}

void batch_norm_grad_sums(const Tensor& sums, const Tensor& gy, const Tensor& x, const Tensor& mean) {
  const Geometry g = geometry(x);
  const double* mp = mean.data<double>();
  double* out = sums.data<double>();
  detail::dispatch_float(x.dtype(), "batch_norm backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* gp = gy.data<T>();
    parallel_for(0, g.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double s[2] = {0, 0};
        for (int64_t n = 0; n < g.n; ++n)
          grad_sums<T>(xp + (n * g.c + c) * g.s, gp + (n * g.c + c) * g.s, g.s, static_cast<T>(mp[c]), s);
        out[c] = s[0];
        out[g.c + c] = s[1];
      }
    });
  });
}

void batch_norm_input_grad(const Tensor& gx, const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& var,
                           const Tensor& weight, const Tensor& sums, double count, double eps) {
  const Geometry g = geometry(x);
  const double* mp = mean.data<double>();
  const double* vp = var.data<double>();
  const double* sp = sums.data<double>();
  detail::dispatch_float(x.dtype(), "batch_norm backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* gp = gy.data<T>();
    const T* wp = opt<T>(weight);
    T* gxp = gx.data<T>();
    parallel_for(0, g.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        // as batch_norm_backward, over the sums of every replica
        const double inv = 1.0 / std::sqrt(vp[c] + eps), w = wp ? static_cast<double>(wp[c]) : 1.0;
        const T k1 = static_cast<T>(w * inv);
        const T k2 = static_cast<T>(w * inv * sp[c] / count);
        const T k3 = static_cast<T>(w * inv * inv * inv * sp[g.c + c] / count);
        const T mu = static_cast<T>(mp[c]);
        input_grad_channel<T>(g, c, xp, gp, gxp, k1, k2, mu, k3);
      }
    });
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/normalization.cpp), with its signature, which the slot checks.
void add_batch_norm_kernels(detail::Backend& b) {
  b.kernels.fill("norm.batch_norm_train", &cpu::batch_norm_train);
  b.kernels.fill("norm.batch_norm_backward", &cpu::batch_norm_backward);
  b.kernels.fill("norm.batch_norm_sums", &cpu::batch_norm_sums);
  b.kernels.fill("norm.batch_norm_apply", &cpu::batch_norm_apply);
  b.kernels.fill("norm.batch_norm_grad_sums", &cpu::batch_norm_grad_sums);
  b.kernels.fill("norm.batch_norm_input_grad", &cpu::batch_norm_input_grad);
}

}  // namespace loom::cpu
