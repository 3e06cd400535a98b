// 2-d pooling over NCHW planes, one (n, c) plane per task: vector kernels for float32 max
// pooling (simd/kernels.inc), oneDNN for float32 average pooling
// (pool_onednn.cpp), plain loops otherwise.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "loom/core/parallel.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/dispatch.h"
#include "ops/internal.h"

namespace loom::cpu {

namespace {
int64_t plane_grain(int64_t work_per_plane) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_plane)); }
}  // namespace

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  const int64_t planes = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t Ho = out.shape()[2], Wo = out.shape()[3];
  const bool k2s2 = p.kernel[0] == 2 && p.kernel[1] == 2 && p.stride[0] == 2 && p.stride[1] == 2 && p.pad[0] == 0 &&
                    p.pad[1] == 0 && p.dilation[0] == 1 && p.dilation[1] == 1 && 2 * Ho <= H && 2 * Wo <= W;
  detail::dispatch_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* X = x.data<T>();
    T* Y = out.data<T>();
    // the argmax indices: int64 (PyTorch's), int32 (a gradient's workspace) or none
    simd::PoolIndex I;
    if (indices.defined() && indices.dtype() == DType::Int32)
      I.i32 = indices.data<int32_t>();
    else if (indices.defined())
      I.i64 = indices.data<int64_t>();
    if constexpr (std::is_same_v<T, float>) {
      if (H * W <= std::numeric_limits<int32_t>::max()) {  // the vector kernels count in int32
        const auto& simd = simd::table();
        if (k2s2) {  // 2x2 windows, stride 2, all inside the plane: the common case
          parallel_for(0, planes, plane_grain(Ho * Wo * 4), [&](int64_t b, int64_t e) {
            for (int64_t pl = b; pl < e; ++pl)
              simd.max_pool_2x2(Y + pl * Ho * Wo, I.at(pl * Ho * Wo), X + pl * H * W, Ho, W, Wo);
          });
          return;
        }
        const simd::PoolGeometry g{H, W, Ho, Wo, p.kernel[0], p.kernel[1], p.stride[0], p.stride[1],
                                   p.pad[0], p.pad[1], p.dilation[0], p.dilation[1]};
        parallel_for(0, planes, plane_grain(Ho * Wo * p.kernel[0] * p.kernel[1]), [&](int64_t b, int64_t e) {
          Tensor scratch = detail::alloc({simd::pool_scratch_size(g)}, DType::Float32, Device::cpu());
          for (int64_t pl = b; pl < e; ++pl)
            simd.max_pool_any(Y + pl * Ho * Wo, I.at(pl * Ho * Wo), X + pl * H * W, g, scratch.data<float>());
        });
        return;
      }
    }
    parallel_for(0, planes, plane_grain(Ho * Wo * p.kernel[0] * p.kernel[1]), [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const T* xp = X + pl * H * W;
        T* yp = Y + pl * Ho * Wo;
        const simd::PoolIndex ip = I.at(pl * Ho * Wo);
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            T best = -std::numeric_limits<T>::infinity();
            int64_t arg = -1;
            for (int64_t ki = 0; ki < p.kernel[0]; ++ki) {
              const int64_t ih = oh * p.stride[0] - p.pad[0] + ki * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kj = 0; kj < p.kernel[1]; ++kj) {
                const int64_t iw = ow * p.stride[1] - p.pad[1] + kj * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                const T v = xp[ih * W + iw];
                // as PyTorch: the first maximum wins, a NaN wins (the last NaN when several)
                if (arg < 0) arg = ih * W + iw;
                if (v > best || std::isnan(v)) {
                  best = v;
                  arg = ih * W + iw;
                }
              }
            }
            // arg stays -1 for a window entirely in the padding (no element, no gradient)
            yp[oh * Wo + ow] = best;
            if (ip.i64) ip.i64[oh * Wo + ow] = arg;
            if (ip.i32) ip.i32[oh * Wo + ow] = static_cast<int32_t>(arg);
          }
      }
    });
  });
}

void max_pool2d_backward(const Tensor& gx, const Tensor& gy, const Tensor& indices) {
  const int64_t planes = gx.shape()[0] * gx.shape()[1], HW = gx.shape()[2] * gx.shape()[3];
  const int64_t HWo = gy.shape()[2] * gy.shape()[3];
  detail::dispatch_float(gx.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* GY = gy.data<T>();
    T* GX = gx.data<T>();
    auto scatter = [&](const auto* I) {
      parallel_for(0, planes, plane_grain(HW), [&](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          T* gp = GX + pl * HW;
          const T* yp = GY + pl * HWo;
          const auto* ip = I + pl * HWo;
          std::memset(gp, 0, sizeof(T) * HW);
          for (int64_t o = 0; o < HWo; ++o)
            if (ip[o] >= 0) gp[ip[o]] += yp[o];  // -1: a window entirely in the padding
        }
      });
    };
    if (indices.dtype() == DType::Int32)
      scatter(indices.data<int32_t>());
    else
      scatter(indices.data<int64_t>());
  });
}

namespace {
// PyTorch's avg_pool2d divisor for one window.
struct Window {
  int64_t h0, h1, w0, w1, divisor;
};
Window avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  int64_t h0 = oh * p.stride[0] - p.pad[0], w0 = ow * p.stride[1] - p.pad[1];
  int64_t h1 = std::min(h0 + p.kernel[0], H + p.pad[0]), w1 = std::min(w0 + p.kernel[1], W + p.pad[1]);
  const int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, H);
  w1 = std::min(w1, W);
  int64_t div = p.divisor > 0 ? p.divisor : (p.count_include_pad ? padded_size : (h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, div};
}
}  // namespace

void avg_pool2d(const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  if (x.dtype() == DType::Float32 && avg_pool2d_onednn(out, x, p)) return;
  const int64_t planes = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t Ho = out.shape()[2], Wo = out.shape()[3];
  detail::dispatch_float(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* X = x.data<T>();
    T* Y = out.data<T>();
    parallel_for(0, planes, plane_grain(Ho * Wo * p.kernel[0] * p.kernel[1]), [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const T* xp = X + pl * H * W;
        T* yp = Y + pl * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const Window wd = avg_window(oh, ow, H, W, p);
            T s = 0;
            for (int64_t ih = wd.h0; ih < wd.h1; ++ih)
              for (int64_t iw = wd.w0; iw < wd.w1; ++iw) s += xp[ih * W + iw];
            yp[oh * Wo + ow] = wd.divisor > 0 ? s / static_cast<T>(wd.divisor) : std::numeric_limits<T>::quiet_NaN();
          }
      }
    });
  });
}

void avg_pool2d_backward(const Tensor& gx, const Tensor& gy, const Pool2dParams& p) {
  if (gx.dtype() == DType::Float32 && avg_pool2d_backward_onednn(gx, gy, p)) return;
  const int64_t planes = gx.shape()[0] * gx.shape()[1], H = gx.shape()[2], W = gx.shape()[3];
  const int64_t Ho = gy.shape()[2], Wo = gy.shape()[3];
  detail::dispatch_float(gx.dtype(), "avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* GY = gy.data<T>();
    T* GX = gx.data<T>();
    parallel_for(0, planes, plane_grain(Ho * Wo * p.kernel[0] * p.kernel[1]), [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        T* gp = GX + pl * H * W;
        const T* yp = GY + pl * Ho * Wo;
        std::memset(gp, 0, sizeof(T) * H * W);
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const Window wd = avg_window(oh, ow, H, W, p);
            if (wd.divisor <= 0) continue;
            const T v = yp[oh * Wo + ow] / static_cast<T>(wd.divisor);
            for (int64_t ih = wd.h0; ih < wd.h1; ++ih)
              for (int64_t iw = wd.w0; iw < wd.w1; ++iw) gp[ih * W + iw] += v;
          }
      }
    });
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/pooling.cpp), with its signature, which the slot checks.
void add_pool_kernels(detail::Backend& b) {
  b.kernels.fill("pool.max_pool2d", &cpu::max_pool2d);
  b.kernels.fill("pool.avg_pool2d", &cpu::avg_pool2d);
  b.kernels.fill("pool.avg_pool2d_backward", &cpu::avg_pool2d_backward);
  b.kernels.fill("pool.max_pool2d_backward", &cpu::max_pool2d_backward);
}

}  // namespace loom::cpu
