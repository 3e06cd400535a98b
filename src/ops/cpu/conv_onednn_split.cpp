// One sample's inference convolution split over Loom's pool (conv_onednn.h): by output channels
// (run_by_channels) or by output rows (run_by_rows), each part on a one-thread OpenMP team.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>

#include "loom/core/parallel.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/onednn.h"
#include "ops/cpu/simd/simd.h"
#include "ops/internal.h"
#include "ops/cpu/conv_onednn.h"

namespace loom::cpu::dnnl_conv {

namespace {

// A copy of rows [r0, r1) of a contiguous float32 tensor (its first axis).
Tensor rows(const Tensor& t, int64_t r0, int64_t r1) {
  const int64_t per = t.numel() / t.shape()[0];
  Tensor out = detail::alloc({(r1 - r0) * per}, DType::Float32, Device::cpu());
  std::memcpy(out.data_ptr(), t.data<float>() + r0 * per, static_cast<size_t>((r1 - r0) * per) * sizeof(float));
  return out;
}

// One part of a single sample's inference call split over Loom's pool: its geometry, plan and
// key, where it reads and writes (offsets in floats) and, for a channel split, its output
// channels.
struct SplitPart {
  ConvDims d;
  std::string key;
  std::shared_ptr<const Plan> plan;
  int64_t src_at = 0, dst_at = 0, c0 = 0, c1 = 0;
  int64_t in_row = 0, out_row = 0;  // the part's first input and output rows (copied parts)
};

// Builds every part's plan (for the one-thread OpenMP teams they run on) before any part runs,
// so that a geometry oneDNN cannot run is found having written nothing; false then.
bool plan_parts(std::vector<SplitPart>& ps, bool bias, Epilogue epi) {
  onednn::use_omp_threads(1);
  for (SplitPart& p : ps) {
    p.key = key_of(Kind::Inference, p.d, bias, epi, 1);
    p.plan = plan_for(p.key, Kind::Inference, p.d, bias, epi);
    if (!p.plan->ok) return false;
  }
  return true;
}

// Runs exec(part) for every part over Loom's pool, each on a one-thread OpenMP team; a oneDNN
// failure throws, naming how the call was split.
void run_parts(const std::vector<SplitPart>& ps, const char* split, const std::function<void(const SplitPart&)>& exec) {
  std::atomic<bool> ok{true};
  parallel_for(0, static_cast<int64_t>(ps.size()), 1, [&](int64_t p0, int64_t p1) {
    onednn::use_omp_threads(1);
    for (int64_t i = p0; i < p1; ++i) try {
        exec(ps[static_cast<size_t>(i)]);
      } catch (const dnnl::error&) {
        ok = false;
      }
  });
  if (!ok)
    throw Error(std::string("conv2d: oneDNN failed to run a convolution on part of its ") + split +
                " (one sample, split over the threads)");
}

}  // namespace

// Inference on a single sample with several threads. One call on an OpenMP team of
// get_num_threads() would leave the team's workers spinning (libgomp's default wait policy)
// while Loom's pool runs the next op on the same cores, and Loom's workers spinning while the
// team runs: measured on 2 cores, ResNet-18 batch 1 runs alternated between ~40 and ~55 ms
// (steady 40 with OMP_WAIT_POLICY=PASSIVE). Instead the output channels are split over Loom's
// pool, each part (a multiple of 16 channels) its own convolution on a one-thread OpenMP team,
// so Loom's pool is the one owner of the cores. Returns false when it does not apply (groups,
// too few channels) or oneDNN has no implementation; the caller then runs the whole call.
bool run_by_channels(const ConvDims& d, bool bias, void* x, void* out, Epilogue epi, const WeightsIn& wi) {
  const int64_t oc = d.wei[0];
  const int64_t parts = std::min<int64_t>(get_num_threads(), oc / 16);
  if (d.src[0] != 1 || d.wei.size() != 4 || parts < 2) return false;
  // an NHWC output's channel parts are not contiguous (run_by_rows splits those)
  if (epi.dst_blocked && blocked_channels() == 1) return false;
  const int64_t plane = d.dst[2] * d.dst[3];
  std::vector<SplitPart> ps(static_cast<size_t>(parts));
  for (int64_t i = 0; i < parts; ++i) {
    SplitPart& p = ps[static_cast<size_t>(i)];
    p.c0 = oc * i / parts / 16 * 16;
    p.c1 = i + 1 == parts ? oc : oc * (i + 1) / parts / 16 * 16;
    p.d = d;
    p.d.wei[0] = p.d.dst[1] = p.c1 - p.c0;
    p.dst_at = p.c0 * plane;
  }
  if (!plan_parts(ps, bias, epi)) return false;
  run_parts(ps, "output channels", [&](const SplitPart& p) {
    // the part's rows of the weights and bias, prepared (and cached) as a whole call's are
    const WeightsIn slice{wi.sources,
                          [&] {
                            const std::vector<Tensor> v = wi.plain();
                            return std::vector<Tensor>{rows(v[0], p.c0, p.c1),
                                                       v.size() > 1 && v[1].defined() ? rows(v[1], p.c0, p.c1) : Tensor()};
                          },
                          true};
    const std::vector<Tensor> ready = prepared(*p.plan, p.key, slice, 1 + p.c0);
    execute(*p.plan, x, ready[0].data_ptr(), static_cast<float*>(out) + p.dst_at,
            ready[1].defined() ? ready[1].data_ptr() : nullptr, true);
  });
  return true;
}

// Inference on a single sample with several threads where the activations are NHWC (oneDNN
// 2.6's brgconv kernels on AVX-512): the output rows are split over Loom's pool, each part its
// own convolution on a one-thread OpenMP team, for the reason run_by_channels gives (whose
// channel parts are not contiguous in NHWC). A part reads the input rows its output rows need,
// the kernel's halo included, and is padded only where the image is. In NHWC a row range of one
// sample is contiguous; a plain NCHW src or dst (the stem's image) is passed with the whole
// tensor's strides. The parts run with the whole call's prepared weights (one layout, one tag).
// Returns false, having written nothing, when it does not apply or oneDNN has no implementation.
//
// In nChw16c a row range is one run per block of 16 channels, which oneDNN 2.6 does not take
// as a sub-memory for its Winograd kernels (it falls back to a reference kernel): there the
// parts are copied, their input rows (with the halo) into a dense buffer and their output rows
// (the residual first, for the sum post-op) back. That pays only where the channel split
// repeats Winograd's input transform on a large plane: the 56x56 64-channel layers of one
// ResNet-18 sample scaled 1.1x on 2 threads by channels (docs/benchmarks-history.md, the Xeon), so
// copied parts are used for oneDNN's Winograd geometries from 32 output rows, with part
// boundaries on multiples of 4 rows (F(4x4, 3x3)'s tile: the parts' tiles are the whole call's).
std::atomic<int64_t> row_split_calls{0};

bool run_by_rows(const ConvDims& d, bool bias, void* x, void* out, void* b, Epilogue epi, const WeightsIn& wi) {
  const int64_t oh = d.dst[2];
  const int64_t parts = std::min<int64_t>(get_num_threads(), oh);
  const int64_t block = blocked_channels();
  const bool copied = block == 16 && winograd() && winograd_geometry(d, epi) && oh >= 32 && d.src[1] % 16 == 0 &&
                      d.dst[1] % 16 == 0;
  if (d.src[0] != 1 || d.wei.size() != 4 || parts < 2 || (block != 1 && !copied)) return false;
  const int64_t ext = (d.wei[2] - 1) * (d.dilates[0] + 1) + 1;  // input rows one output row reads
  // NHWC (blocked) parts are dense; NCHW parts keep the whole tensor's strides
  const int64_t src_row = epi.src_blocked ? d.src[1] * d.src[3] : d.src[3];
  const int64_t dst_row = epi.dst_blocked ? d.dst[1] * d.dst[3] : d.dst[3];
  std::vector<SplitPart> ps(static_cast<size_t>(parts));
  auto boundary = [&](int64_t i) { return i == parts ? oh : copied ? oh * i / parts / 4 * 4 : oh * i / parts; };
  for (int64_t i = 0; i < parts; ++i) {
    const int64_t o0 = boundary(i), o1 = boundary(i + 1);
    if (o1 <= o0) return false;
    const int64_t first = o0 * d.strides[0] - d.pad_l[0], end = (o1 - 1) * d.strides[0] - d.pad_l[0] + ext;
    const int64_t i0 = std::clamp<int64_t>(first, 0, d.src[2]), i1 = std::clamp<int64_t>(end, 0, d.src[2]);
    if (i1 <= i0) return false;  // rows of padding only
    SplitPart& p = ps[static_cast<size_t>(i)];
    p.d = d;
    p.d.src[2] = i1 - i0;
    p.d.dst[2] = o1 - o0;
    p.d.pad_l[0] = i0 - first;
    p.d.pad_r[0] = end - i1;
    if (!epi.src_blocked) p.d.src_user_strides = {d.src[1] * d.src[2] * d.src[3], d.src[2] * d.src[3], d.src[3], 1};
    if (!epi.dst_blocked) p.d.dst_user_strides = {d.dst[1] * d.dst[2] * d.dst[3], d.dst[2] * d.dst[3], d.dst[3], 1};
    p.src_at = i0 * src_row;
    p.dst_at = o0 * dst_row;
    p.in_row = i0;
    p.out_row = o0;
  }
  if (!plan_parts(ps, bias, epi)) return false;
  // copied parts' dense buffers, allocated before any part runs (a failure writes nothing)
  std::vector<std::pair<Tensor, Tensor>> dense;
  if (copied)
    for (const SplitPart& p : ps)
      dense.emplace_back(detail::alloc({d.src[1] * p.d.src[2] * d.src[3]}, DType::Float32, Device::cpu()),
                         detail::alloc({d.dst[1] * p.d.dst[2] * d.dst[3]}, DType::Float32, Device::cpu()));
  run_parts(ps, "output rows", [&](const SplitPart& p) {
    const std::vector<Tensor> ready = prepared(*p.plan, p.key, wi);
    void* bb = wi.folded ? (ready[1].defined() ? ready[1].data_ptr() : nullptr) : b;
    if (!copied) {
      execute(*p.plan, static_cast<float*>(x) + p.src_at, ready[0].data_ptr(), static_cast<float*>(out) + p.dst_at, bb,
              true);
      return;
    }
    // rows [row, row + rows) of every 16-channel block of a (blocks, height, width, 16) tensor
    // to or from a dense (blocks, rows, width, 16) one
    auto copy_rows = [](float* whole, float* part, int64_t blocks, int64_t height, int64_t width, int64_t row,
                        int64_t rows, bool into_part) {
      const int64_t run = rows * width * 16;
      for (int64_t cb = 0; cb < blocks; ++cb) {
        float* w = whole + (cb * height + row) * width * 16;
        float* q = part + cb * run;
        std::memcpy(into_part ? q : w, into_part ? w : q, static_cast<size_t>(run) * sizeof(float));
      }
    };
    const int64_t in_blocks = d.src[1] / 16, out_blocks = d.dst[1] / 16;
    const auto& [src, dst] = dense[static_cast<size_t>(&p - ps.data())];
    copy_rows(static_cast<float*>(x), src.data<float>(), in_blocks, d.src[2], d.src[3], p.in_row, p.d.src[2], true);
    if (epi.sum)
      copy_rows(static_cast<float*>(out), dst.data<float>(), out_blocks, d.dst[2], d.dst[3], p.out_row, p.d.dst[2], true);
    execute(*p.plan, src.data_ptr(), ready[0].data_ptr(), dst.data_ptr(), bb, true);
    copy_rows(static_cast<float*>(out), dst.data<float>(), out_blocks, d.dst[2], d.dst[3], p.out_row, p.d.dst[2], false);
  });
  row_split_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace loom::cpu::dnnl_conv

namespace loom::cpu {

using namespace dnnl_conv;

int64_t conv2d_row_split_calls() { return row_split_calls.load(std::memory_order_relaxed); }

}  // namespace loom::cpu
