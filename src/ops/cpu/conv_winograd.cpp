// Winograd convolutions for inference on blocked activations, where oneDNN 2.6 has no Winograd
// kernel (it has them for AVX-512 only): 3x3, stride 1, undilated, one group. F(m x m, 3x3)
// for m = 2 or 4: per m x m output tile the (m+2)² input patch is transformed (B^T d B), the
// (m+2)² transformed positions are multiplied with the transformed weights (G g G^T) as that
// many GEMMs over the channels, and the products transformed back (A^T m A): per input channel
// and output pair, 16 multiply-adds for 4 outputs (F(2x2)) or 36 for 16 (F(4x4)) instead of 9
// per output. Tiles are processed in chunks small enough for the transformed data to stay in
// cache, one chunk per task of Loom's pool, each GEMM on a one-thread OpenMP team; with fewer
// tiles than a chunk per thread, the phases run in turn. docs/kernels.md, "Winograd for 3x3
// convolutions".
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>

#include "loom/core/parallel.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/onednn.h"
#include "ops/cpu/simd/simd.h"
#include "ops/internal.h"

namespace loom::cpu {

Tensor winograd_weights(const Tensor& w, int m) {
  const int64_t k = w.shape()[0], c = w.shape()[1];
  const int a = m + 2;
  Tensor wc = w.is_contiguous() ? w : w.copy();
  Tensor u = detail::alloc({a * a, c, k}, DType::Float32, Device::cpu());
  const float* g = wc.data<float>();
  float* up = u.data<float>();
  // G (a x 3) of F(2x2) on the points 0, 1, -1, inf, or of F(4x4) on 0, -1, 1, 1/2, -2, inf
  // (kernels.inc); U = G g G^T in double, rounded once
  static constexpr double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static constexpr double G4[6][3] = {{1, 0, 0},
                                      {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                      {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                      {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                      {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                      {0, 0, 1}};
  const double(*G)[3] = m == 2 ? G2 : G4;
  parallel_for(0, k, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t o = k0; o < k1; ++o)
      for (int64_t i = 0; i < c; ++i) {
        const float* f = g + (o * c + i) * 9;
        double t[6][3];  // G g
        for (int r = 0; r < a; ++r)
          for (int q = 0; q < 3; ++q) t[r][q] = G[r][0] * f[q] + G[r][1] * f[3 + q] + G[r][2] * f[6 + q];
        for (int r = 0; r < a; ++r)
          for (int q = 0; q < a; ++q)
            up[((r * a + q) * c + i) * k + o] = static_cast<float>(t[r][0] * G[q][0] + t[r][1] * G[q][1] + t[r][2] * G[q][2]);
      }
  });
  return u;
}

namespace {
// Uninitialised float32 scratch from the allocator's cache (every element is written before
// it is read): no zero fill, no fresh pages per call.
Tensor scratch(int64_t n) { return detail::alloc({n}, DType::Float32, Device::cpu()); }

// One Winograd convolution's geometry and its three phases over a range of tiles: the input
// patches transformed into v (a² x nt x c), the a² GEMMs with the transformed weights into the
// products (a² x nt x k), and the products transformed back into out.
struct WinogradConv {
  int64_t n, c, h, w, k, oh, ow;
  int m, a, e_count;  // the tile's side, the patch's side, the transformed positions
  int64_t th, tw, tiles, cb, kb, block, pad_top, pad_left;
  const float* xp;
  float* yp;
  const float* up;
  const float* bias;
  bool sum, relu;
  decltype(simd::Table::winograd_f2_input) input;
  decltype(simd::Table::winograd_f2_output) output;
  std::atomic<bool> ok{true};

  WinogradConv(const Tensor& out, const Tensor& x, const Tensor& u, const float* bias_, int64_t block_, int m_, int64_t pad_top_,
               int64_t pad_left_, bool sum_, bool relu_)
      : n(x.shape()[0]), c(x.shape()[1]), h(x.shape()[2]), w(x.shape()[3]), k(out.shape()[1]), oh(out.shape()[2]),
        ow(out.shape()[3]), m(m_), a(m_ + 2), e_count((m_ + 2) * (m_ + 2)), th((oh + m - 1) / m), tw((ow + m - 1) / m),
        tiles(n * th * tw), cb(c / block_), kb(k / block_), block(block_), pad_top(pad_top_), pad_left(pad_left_),
        xp(x.data<float>()), yp(out.data<float>()), up(u.data<float>()), bias(bias_), sum(sum_), relu(relu_),
        input(m == 2 ? simd::table().winograd_f2_input : simd::table().winograd_f4_input),
        output(m == 2 ? simd::table().winograd_f2_output : simd::table().winograd_f4_output) {}

  // tiles [t0, t0 + nt) (those from i0 to i1 of them) into v; a patch's positions outside the
  // image are null (zero padding)
  void transform_in(float* v, int64_t t0, int64_t nt, int64_t i0, int64_t i1) const {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t tile = t0 + i, s = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
      const int64_t y0 = m * ty - pad_top, x0 = m * tx - pad_left;
      for (int64_t g = 0; g < cb; ++g) {
        const float* plane = xp + (s * cb + g) * h * w * block;
        const float* d[36];
        for (int r = 0; r < a; ++r)
          for (int q = 0; q < a; ++q) {
            const int64_t yy = y0 + r, xx = x0 + q;
            d[r * a + q] = yy >= 0 && yy < h && xx >= 0 && xx < w ? plane + (yy * w + xx) * block : nullptr;
          }
        input(v + i * c + g * block, nt * c, d, block);
      }
    }
  }
  // the GEMMs of transformed positions [e0, e1)
  void multiply(const float* v, float* prod, int64_t nt, int e0, int e1) {
    for (int e = e0; e < e1; ++e)
      if (dnnl_sgemm('N', 'N', nt, k, c, 1.0f, v + e * nt * c, c, up + e * c * k, k, 0.0f, prod + e * nt * k, k) != dnnl_success)
        ok = false;
  }
  // the products of tiles [t0, t0 + nt) (those from i0 to i1) back into out; outputs past its
  // edge are null
  void transform_out(const float* prod, int64_t t0, int64_t nt, int64_t i0, int64_t i1) const {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t tile = t0 + i, s = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
      for (int64_t g = 0; g < kb; ++g) {
        float* plane = yp + (s * kb + g) * oh * ow * block;
        float* o[16];
        for (int r = 0; r < m; ++r)
          for (int q = 0; q < m; ++q) {
            const int64_t yy = m * ty + r, xx = m * tx + q;
            o[r * m + q] = yy < oh && xx < ow ? plane + (yy * ow + xx) * block : nullptr;
          }
        output(o, prod + i * k + g * block, nt * k, bias ? bias + g * block : nullptr, sum, relu, block);
      }
    }
  }
};

// Too few tiles for a chunk per thread (one sample, deep layers): the three phases in turn,
// each over the pool; the a² GEMMs split between the threads keep all their rows.
void run_by_phases(WinogradConv& conv) {
  const int64_t tiles = conv.tiles;
  const Tensor vt = scratch(conv.e_count * tiles * conv.c), mt = scratch(conv.e_count * tiles * conv.k);
  float* v = vt.data<float>();
  float* prod = mt.data<float>();
  parallel_for(0, tiles, 1, [&](int64_t i0, int64_t i1) { conv.transform_in(v, 0, tiles, i0, i1); });
  parallel_for(0, conv.e_count, 1, [&](int64_t e0, int64_t e1) {
    onednn::use_omp_threads(1);
    conv.multiply(v, prod, tiles, static_cast<int>(e0), static_cast<int>(e1));
  });
  parallel_for(0, tiles, 1, [&](int64_t i0, int64_t i1) { conv.transform_out(prod, 0, tiles, i0, i1); });
}

// Chunks of `chunk` tiles, each through the three phases on one thread, its data in cache.
void run_by_chunks(WinogradConv& conv, int64_t chunk) {
  const int64_t chunks = (conv.tiles + chunk - 1) / chunk;
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    onednn::use_omp_threads(1);
    const Tensor vt = scratch(conv.e_count * chunk * conv.c), mt = scratch(conv.e_count * chunk * conv.k);
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t t0 = ch * chunk, nt = std::min(chunk, conv.tiles - t0);
      conv.transform_in(vt.data<float>(), t0, nt, 0, nt);
      conv.multiply(vt.data<float>(), mt.data<float>(), nt, 0, conv.e_count);
      conv.transform_out(mt.data<float>(), t0, nt, 0, nt);
    }
  });
}

}  // namespace

void conv2d_winograd(const Tensor& out, const Tensor& x, const Tensor& u, const float* bias, int64_t block, int m,
                     int64_t pad_top, int64_t pad_left, bool sum, bool relu) {
  WinogradConv conv(out, x, u, bias, block, m, pad_top, pad_left, sum, relu);
  // tiles per chunk: the transformed inputs and products (a² x chunk x (c + k) floats) within
  // ~1 MiB (an L2), but at least 64: every chunk reads all a² x c x k transformed weights again,
  // which for wide layers (37.7 MB for F(4x4) at 512 channels) costs more than the spill
  // (ResNet-18 at batch 32 capped to AVX2 on a 2 MiB-L2 Xeon: 892 -> 755 ms at 1 thread with a
  // floor of 64 instead of 16; docs/kernels.md)
  const int64_t chunk = std::max<int64_t>(64, (1 << 20) / (conv.e_count * 4 * (conv.c + conv.k)));
  const int64_t threads = get_num_threads();
  if (threads > 1 && conv.tiles < threads * chunk) run_by_phases(conv);
  else run_by_chunks(conv, chunk);
  if (!conv.ok) throw Error("conv2d: oneDNN's sgemm failed in a Winograd convolution");
}

}  // namespace loom::cpu
