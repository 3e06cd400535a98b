// Plain convolution kernels: im2col + GEMM (OpenBLAS), one image and one group at a time.
// They serve float64 (the finite-difference reference) and are the fallback for float32
// geometries oneDNN does not implement. The backend entry points live here too.
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B,
              ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0, A, lda, B,
              ldb, beta, C, ldc);
}

struct Geometry {
  int64_t N, C, H, W;      // input
  int64_t OC, kh, kw;      // weights (OC, C / groups, kh, kw)
  int64_t Ho, Wo;          // output
  int64_t G, Cg, OCg, K;   // groups, channels per group, K = Cg * kh * kw
};

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, int64_t groups) {
  Geometry g{};
  g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
  g.OC = w[0], g.kh = w[2], g.kw = w[3];
  g.Ho = y[2], g.Wo = y[3];
  g.G = groups, g.Cg = g.C / groups, g.OCg = g.OC / groups;
  g.K = g.Cg * g.kh * g.kw;
  return g;
}

// col (K, Ho * Wo) from one group's input planes x (Cg, H, W); zeros where the window is in padding.
template <typename T>
void im2col(const T* x, T* col, const Geometry& g, const Conv2dParams& p) {
  const int64_t HW = g.Ho * g.Wo;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        T* row = col + ((c * g.kh + ki) * g.kw + kj) * HW;
        const T* plane = x + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * p.stride[0] - p.pad_l[0] + ki * p.dilation[0];
          T* r = row + oh * g.Wo;
          if (ih < 0 || ih >= g.H) {
            std::memset(r, 0, sizeof(T) * g.Wo);
            continue;
          }
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t iw = ow * p.stride[1] - p.pad_l[1] + kj * p.dilation[1];
            r[ow] = (iw >= 0 && iw < g.W) ? plane[ih * g.W + iw] : T(0);
          }
        }
      }
}

// The adjoint of im2col: adds col back into the planes x (Cg, H, W).
template <typename T>
void col2im(const T* col, T* x, const Geometry& g, const Conv2dParams& p) {
  const int64_t HW = g.Ho * g.Wo;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const T* row = col + ((c * g.kh + ki) * g.kw + kj) * HW;
        T* plane = x + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * p.stride[0] - p.pad_l[0] + ki * p.dilation[0];
          if (ih < 0 || ih >= g.H) continue;
          const T* r = row + oh * g.Wo;
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t iw = ow * p.stride[1] - p.pad_l[1] + kj * p.dilation[1];
            if (iw >= 0 && iw < g.W) plane[ih * g.W + iw] += r[ow];
          }
        }
      }
}

bool is_pointwise(const Geometry& g, const Conv2dParams& p) {
  return g.kh == 1 && g.kw == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.pad_l[0] == 0 && p.pad_l[1] == 0 &&
         g.Ho == g.H && g.Wo == g.W;
}

bool force_reference() {
  static const bool force = [] {
    const char* e = std::getenv("LOOM_CONV_REFERENCE");
    return e && *e && *e != '0';
  }();
  return force;
}

}  // namespace

void conv2d_ref(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  const Geometry g = geometry(x.shape(), w.shape(), out.shape(), p.groups);
  detail::dispatch_float(out.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    const T* X = x.data<T>();
    const T* Wt = w.data<T>();
    T* Y = out.data<T>();
    const int64_t HW = g.Ho * g.Wo;
    const bool pointwise = is_pointwise(g, p);
    std::vector<T> col(pointwise ? 0 : static_cast<size_t>(g.K * HW));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const T* xin = X + (n * g.C + gi * g.Cg) * g.H * g.W;
        const T* c = xin;
        if (!pointwise) {
          im2col(xin, col.data(), g, p);
          c = col.data();
        }
        T* y = Y + (n * g.OC + gi * g.OCg) * HW;
        if (HW > 0 && g.OCg > 0) {
          if (g.K > 0)
            gemm(false, false, g.OCg, HW, g.K, Wt + gi * g.OCg * g.K, g.K, c, HW, T(0), y, HW);
          else
            std::memset(y, 0, sizeof(T) * g.OCg * HW);
        }
        if (bias.defined()) {
          const T* b = bias.data<T>() + gi * g.OCg;
          for (int64_t o = 0; o < g.OCg; ++o)
            for (int64_t i = 0; i < HW; ++i) y[o * HW + i] += b[o];
        }
      }
  });
}

void conv2d_backward_data_ref(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p) {
  const Geometry g = geometry(gx.shape(), w.shape(), gy.shape(), p.groups);
  detail::dispatch_float(gx.dtype(), "conv2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* GY = gy.data<T>();
    const T* Wt = w.data<T>();
    T* GX = gx.data<T>();
    std::memset(GX, 0, sizeof(T) * static_cast<size_t>(gx.numel()));
    const int64_t HW = g.Ho * g.Wo;
    if (HW == 0 || g.OCg == 0 || g.K == 0) return;
    const bool pointwise = is_pointwise(g, p);
    std::vector<T> col(static_cast<size_t>(g.K * HW));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        T* xout = GX + (n * g.C + gi * g.Cg) * g.H * g.W;
        const T* y = GY + (n * g.OC + gi * g.OCg) * HW;
        // col = W_g^T (K x OCg) @ gy_g (OCg x HW)
        T* c = pointwise ? xout : col.data();
        gemm(true, false, g.K, HW, g.OCg, Wt + gi * g.OCg * g.K, g.K, y, HW, T(0), c, HW);
        if (!pointwise) col2im(col.data(), xout, g, p);
      }
  });
}

void conv2d_backward_weights_ref(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p) {
  const Geometry g = geometry(x.shape(), gw.shape(), gy.shape(), p.groups);
  detail::dispatch_float(gw.dtype(), "conv2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* GY = gy.data<T>();
    const T* X = x.data<T>();
    T* GW = gw.data<T>();
    std::memset(GW, 0, sizeof(T) * static_cast<size_t>(gw.numel()));
    const int64_t HW = g.Ho * g.Wo;
    if (HW == 0 || g.OCg == 0 || g.K == 0) return;
    const bool pointwise = is_pointwise(g, p);
    std::vector<T> col(pointwise ? 0 : static_cast<size_t>(g.K * HW));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const T* xin = X + (n * g.C + gi * g.Cg) * g.H * g.W;
        const T* c = xin;
        if (!pointwise) {
          im2col(xin, col.data(), g, p);
          c = col.data();
        }
        const T* y = GY + (n * g.OC + gi * g.OCg) * HW;
        // gw_g (OCg x K) += gy_g (OCg x HW) @ col^T (HW x K)
        gemm(false, true, g.OCg, g.K, HW, y, HW, c, HW, T(1), GW + gi * g.OCg * g.K, g.K);
      }
  });
}

// ---------------------------------------------------------------- backend entry points
void conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  if (out.numel() == 0) return;
  if (out.dtype() == DType::Float32 && !force_reference() && conv2d_onednn(out, x, w, bias, p)) return;
  conv2d_ref(out, x, w, bias, p);
}

void conv2d_backward_data(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p) {
  if (gx.numel() == 0) return;
  if (gx.dtype() == DType::Float32 && !force_reference() && gy.numel() > 0 && w.numel() > 0 &&
      conv2d_backward_data_onednn(gx, gy, w, p))
    return;
  conv2d_backward_data_ref(gx, gy, w, p);
}

void conv2d_backward_weights(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p) {
  if (gw.numel() == 0) return;
  if (gw.dtype() == DType::Float32 && !force_reference() && gy.numel() > 0 && x.numel() > 0 &&
      conv2d_backward_weights_onednn(gw, gy, x, p))
    return;
  conv2d_backward_weights_ref(gw, gy, x, p);
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/conv.cpp), with its signature, which the slot checks.
void add_conv_ref_kernels(detail::Backend& b) {
  b.kernels.fill("conv.conv2d", &cpu::conv2d);
  b.kernels.fill("conv.conv2d_backward_data", &cpu::conv2d_backward_data);
  b.kernels.fill("conv.conv2d_backward_weights", &cpu::conv2d_backward_weights);
}

}  // namespace loom::cpu
