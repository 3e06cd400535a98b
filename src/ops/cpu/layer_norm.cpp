// Fused layer norm over the last `cols` values of contiguous x (rows, cols): three passes over
// each row forward (mean, centred moments, output) and two backward (three row sums, then the
// input gradient with the weight / bias column sums), each while the row is still in L1,
// instead of the ~8 (forward) and ~20 (backward) whole-tensor passes of the composite.
//
// Accuracy: the mean m0 of the first pass is refined in the second from d = x - m0 (exact
// when x is near m0), c = mean(d), var = mean(d^2) - c^2, and the output uses
// ((x - m0) - c): rows with a large common offset (1e4 + N(0, 1)) keep float32 accuracy in
// the mean, the variance and the output. Backward recomputes c against the stored mean the
// same way. Row sums run in vector accumulators, folded into a double every kChunk values.
//
// Threads: rows are split over the pool. The weight / bias gradients are column sums over
// rows: each fixed block of kRowBlock rows writes its own partial sums, and the blocks are
// added in block order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/loops.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/row_sums.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/dispatch.h"
#include "ops/internal.h"

namespace loom::cpu {

namespace {

using namespace row_sums;

constexpr int64_t kRowBlock = 32;   // rows per partial column sum (backward)

// The generic row kernels (float64; float32 runs the vector ones of simd::Table, which follow
// the same arithmetic).
template <typename T>
void forward_rows(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t rows, int64_t n, double eps) {
  const double nd = static_cast<double>(n);
  for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
    const T m0 = static_cast<T>(row_sum(x, n) / nd);
    double s1, s2;
    row_centred(x, n, m0, s1, s2);
    const double c = s1 / nd;
    double var = s2 / nd - c * c;
    if (var < 0) var = 0;  // rounding (NaN stays NaN)
    const double inv = 1.0 / std::sqrt(var + eps);
    mean[r] = static_cast<T>(static_cast<double>(m0) + c);
    rstd[r] = static_cast<T>(inv);
    const T ct = static_cast<T>(c), rt = static_cast<T>(inv);
    if (w && b) {
      for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - m0) - ct) * rt * w[j] + b[j];
    } else if (w) {
      for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - m0) - ct) * rt * w[j];
    } else if (b) {
      for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - m0) - ct) * rt + b[j];
    } else {
      for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - m0) - ct) * rt;
    }
  }
}

template <typename T>
void backward_rows(T* gx, T* gw_acc, T* gb_acc, const T* g, const T* x, const T* mean, const T* rstd, const T* w,
                   int64_t rows, int64_t n) {
  const double nd = static_cast<double>(n);
  for (int64_t r = 0; r < rows; ++r, x += n, g += n) {
    const T m = mean[r], rs = rstd[r];
    double sd, sg, sgd;
    row_grad_sums(x, g, w, n, m, sd, sg, sgd);
    const double c = sd / nd;  // mean(x) - m: what rounding the stored mean lost
    const double mean_gh = sg / nd, mean_ghxhat = static_cast<double>(rs) * (sgd - c * sg) / nd;
    const T ct = static_cast<T>(c), k2 = static_cast<T>(rs * mean_gh), k3 = static_cast<T>(rs * mean_ghxhat);
    if (gx) {
      // gx = rs * (g w - mean(g w) - xhat * mean(g w xhat))
      T* o = gx + r * n;
      if (w) {
        for (int64_t j = 0; j < n; ++j) o[j] = (g[j] * w[j] * rs - k2) - ((x[j] - m) - ct) * rs * k3;
      } else {
        for (int64_t j = 0; j < n; ++j) o[j] = (g[j] * rs - k2) - ((x[j] - m) - ct) * rs * k3;
      }
    }
    if (gw_acc)
      for (int64_t j = 0; j < n; ++j) gw_acc[j] += g[j] * (((x[j] - m) - ct) * rs);
    if (gb_acc)
      for (int64_t j = 0; j < n; ++j) gb_acc[j] += g[j];
  }
}

template <typename T>
void forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
             const Tensor& bias, int64_t cols, double eps) {
  const int64_t rows = mean.numel();
  if (rows == 0) return;
  T* mp = mean.data<T>();
  T* rp = rstd.data<T>();
  if (cols == 0) {
    std::fill(mp, mp + rows, std::numeric_limits<T>::quiet_NaN());
    std::fill(rp, rp + rows, std::numeric_limits<T>::quiet_NaN());
    return;
  }
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const T* wp = opt<T>(weight);
  const T* bp = opt<T>(bias);
  parallel_range(0, rows, std::max<int64_t>(1, kGrain / cols), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>)
      simd::table().layer_norm_rows(yp + r0 * cols, mp + r0, rp + r0, xp + r0 * cols, wp, bp, r1 - r0, cols, eps);
    else
      forward_rows(yp + r0 * cols, mp + r0, rp + r0, xp + r0 * cols, wp, bp, r1 - r0, cols, eps);
  });
}

template <typename T>
void backward(const Tensor& gx, const Tensor& gweight, const Tensor& gbias, const Tensor& gy, const Tensor& x,
              const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t cols) {
  const int64_t rows = mean.numel();
  T* gwp = gweight.defined() ? gweight.data<T>() : nullptr;
  T* gbp = gbias.defined() ? gbias.data<T>() : nullptr;
  if (cols == 0) return;
  if (rows == 0) {
    if (gwp) std::fill(gwp, gwp + cols, T(0));
    if (gbp) std::fill(gbp, gbp + cols, T(0));
    return;
  }
  const T* xp = x.data<T>();
  const T* gp = gy.data<T>();
  const T* mp = mean.data<T>();
  const T* rp = rstd.data<T>();
  const T* wp = opt<T>(weight);
  // Over one value, y = b whatever x: the input gradient is exactly zero. The formula gives it
  // only up to rounding, which rstd = 1/sqrt(eps) then scales up (-4e-6 at eps 1e-5).
  if (cols == 1 && gx.defined()) std::fill(gx.data<T>(), gx.data<T>() + rows, T(0));
  T* gxp = gx.defined() && cols > 1 ? gx.data<T>() : nullptr;
  // Column sums of g * xhat and g per fixed block of kRowBlock rows, whatever the thread count.
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  Tensor pw_t = gwp ? detail::alloc({blocks, cols}, x.dtype(), x.device()) : Tensor();
  Tensor pb_t = gbp ? detail::alloc({blocks, cols}, x.dtype(), x.device()) : Tensor();
  T* pw = gwp ? pw_t.data<T>() : nullptr;
  T* pb = gbp ? pb_t.data<T>() : nullptr;
  parallel_range(0, blocks, std::max<int64_t>(1, kGrain / (kRowBlock * cols)), [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      T* accw = pw ? pw + blk * cols : nullptr;
      T* accb = pb ? pb + blk * cols : nullptr;
      if (accw) std::fill(accw, accw + cols, T(0));
      if (accb) std::fill(accb, accb + cols, T(0));
      const int64_t r0 = blk * kRowBlock, n = std::min(rows, r0 + kRowBlock) - r0;
      T* gxr = gxp ? gxp + r0 * cols : nullptr;
      if constexpr (std::is_same_v<T, float>)
        simd::table().layer_norm_backward_rows(gxr, accw, accb, gp + r0 * cols, xp + r0 * cols, mp + r0, rp + r0, wp,
                                               n, cols);
      else
        backward_rows(gxr, accw, accb, gp + r0 * cols, xp + r0 * cols, mp + r0, rp + r0, wp, n, cols);
    }
  });
  if (!pw && !pb) return;
  // the blocks' partial sums, added in block order (in double)
  constexpr int64_t kCols = 256;
  const int64_t col_blocks = (cols + kCols - 1) / kCols;
  parallel_range(0, col_blocks, std::max<int64_t>(1, kGrain / (blocks * kCols)), [&](int64_t c0, int64_t c1) {
    double acc[kCols];
    for (int64_t cb = c0; cb < c1; ++cb) {
      const int64_t j0 = cb * kCols, jn = std::min(kCols, cols - j0);
      for (int which = 0; which < 2; ++which) {
        const T* part = which == 0 ? pw : pb;
        T* out = which == 0 ? gwp : gbp;
        if (!part) continue;
        std::fill(acc, acc + jn, 0.0);
        for (int64_t blk = 0; blk < blocks; ++blk) {
          const T* p = part + blk * cols + j0;
          for (int64_t j = 0; j < jn; ++j) acc[j] += static_cast<double>(p[j]);
        }
        for (int64_t j = 0; j < jn; ++j) out[j0 + j] = static_cast<T>(acc[j]);
      }
    }
  });
}

}  // namespace

void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, int64_t cols, double eps) {
  detail::dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    forward<decltype(tag)>(y, mean, rstd, x, weight, bias, cols, eps);
  });
}

void layer_norm_backward(const Tensor& gx, const Tensor& gweight, const Tensor& gbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t cols) {
  detail::dispatch_float(x.dtype(), "layer_norm backward", [&](auto tag) {
    backward<decltype(tag)>(gx, gweight, gbias, g, x, mean, rstd, weight, cols);
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/normalization.cpp), with its signature, which the slot checks.
void add_layer_norm_kernels(detail::Backend& b) {
  b.kernels.fill("norm.layer_norm", &cpu::layer_norm);
  b.kernels.fill("norm.layer_norm_backward", &cpu::layer_norm_backward);
}

}  // namespace loom::cpu
