#pragma once
// The oneDNN convolutions' private parts, shared by the files that implement them:
// conv_onednn_plan.cpp (primitive plans: layouts, the Winograd choice, building, the plan
// cache, prepared weights, execution), conv_onednn_split.cpp (one sample's inference split over
// Loom's pool), conv_onednn.cpp (batch slices and the entries of nn_kernels.h: forward,
// inference / fused, backward) and conv_onednn_blocked.cpp (the blocked activation layout:
// reorders, max pooling).
//
// float32 convolutions on oneDNN 2.x (Debian's libdnnl, OpenMP runtime).
//
// A Plan holds one primitive (forward, inference, backward-data or backward-weights) for one geometry,
// built once and kept in a process-wide cache keyed by the geometry, the kind and the thread
// count (oneDNN may tune a primitive for the thread count it was made with). The primitive
// chooses its own memory layouts (format tag "any", usually blocked nChw16c / OIhw16i16o);
// Loom's tensors stay plain NCHW / OIHW, so the plan also holds the reorders between the two.
// LOOM_DNNL_LAYOUT=plain asks oneDNN for plain layouts instead (no reorders; gemm-based
// implementations), for comparison.
//
// Blocked activations (FusedConv::x_blocked / out_blocked, for the graph compiler): the fused
// entry may read x and write out (with the residual) in the blocked layout the primitive picks
// for activations (nChw8c on AVX2, nChw16c or NHWC on AVX-512; blocked_channels()), held in a
// float32 tensor of the logical NCHW shape. Only for channel counts that are multiples of the
// block, so the buffer has no padding and batch slices and, for nChw8c / nChw16c,
// run_by_channels' channel parts (multiples of 16 channels) sit at the same offsets as in NCHW;
// NHWC is offered only where run_by_channels does not apply (conv2d_blocked_onednn).
//
// Inference (Conv2dParams::inference, and the fused entry conv2d_fused_onednn): a
// forward_inference primitive, optionally with post-ops (sum for a residual, ReLU), whose
// weights are reordered (and batch norm folded in) once and kept in onednn::prepared_weights()
// while the weight tensors' storage versions stay the same. Between blocked activations a 3x3
// stride-1 convolution runs on Winograd kernels: oneDNN's on AVX-512 (which then make the
// layout nChw16c), Loom's own (conv_winograd.cpp) on nChw8c.
//
// Threads: the batch is split over Loom's pool and each slice runs on a one-thread OpenMP team
// (onednn::for_each_batch_slice); a batch smaller than the thread count runs on an OpenMP team
// of loom::get_num_threads() instead, except inference on one sample, whose output is split
// over Loom's pool: by channels (run_by_channels), or by rows where the layout is NHWC
// (run_by_rows).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/onednn.h"

namespace loom::cpu::dnnl_conv {

using onednn::engine;
using onednn::staging;
using onednn::thread_stream;
using mdims = dnnl::memory::dims;
using mdesc = dnnl::memory::desc;
using ftag = dnnl::memory::format_tag;
constexpr auto f32 = dnnl::memory::data_type::f32;

struct ConvDims {
  mdims src, wei, dst, strides, dilates, pad_l, pad_r;
  // an inference call's plain (NCHW) src / dst that is a row range of a larger tensor
  // (run_by_rows): its memory strides; empty for a whole, dense tensor
  mdims src_user_strides, dst_user_strides;
};

enum class Kind { Forward, BackwardData, BackwardWeights, Inference };

// The post-ops of an inference plan: dst = relu(conv + dst) with the residual already in dst;
// and whether src / dst (with the residual) are in the blocked activation layout.
struct Epilogue {
  bool sum = false, relu = false, src_blocked = false, dst_blocked = false;
};

// Inference plans built on Winograd kernels, oneDNN's or Loom's (for tests).
extern std::atomic<int64_t> winograd_plans;

// Which operands ask oneDNN for plain layouts ({src, weights and dst}). Blocked layouts pad
// channels to multiples of 8 / 16: for inputs with few channels (a first layer on images) the
// padded backward passes cost more than they gain, so training geometries stay plain there
// (measured: N=128, C=1 -> 32, 28x28 forward+backward 3x faster plain). Inference has no
// backward pass: from 3 input channels only the input stays plain, and the weights and output
// may be blocked, which lets oneDNN take its jit kernel for a plain few-channel input (jit:avx2
// on the ResNet stem instead of gemm:jit). With 1 input channel (measured; 2 is untested) the
// output's reorder back from blocked costs more than the kernel gains, so it stays plain
// (timings in docs/kernels.md).
struct Layouts {
  bool src, rest;
};

// One operand of a plan: its oneDNN argument id, the user's plain layout, the primitive's
// layout and (when they differ) the reorder between them.
struct Operand {
  int arg = 0;
  mdesc user, prim;
  bool reorder = false;
  dnnl::primitive convert;
  mdesc convert_scratch;
};

struct Plan {
  bool ok = false;
  dnnl::primitive prim;
  mdesc scratch;  // the primitive's scratchpad (user-managed: see onednn::user_scratchpad)
  Operand in[2], out;
  Operand out_load;  // a sum post-op on a reordered output: the residual into the primitive's layout
  bool has_bias = false;
};

// Where an inference plan's weights come from: plain() makes them ({weights OIHW, bias}) from
// `sources`; folded: plain() computes new tensors (batch norm folded in) rather than returning
// the caller's weights and bias as they are.
struct WeightsIn {
  std::vector<Tensor> sources;
  std::function<std::vector<Tensor>()> plain;
  bool folded = false;
};

// conv_onednn_plan.cpp
bool plain_layouts();
ConvDims conv_dims(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p);
mdesc plain_md(const mdims& d);
mdesc user_md(const mdims& d, const mdims& strides);
bool winograd_allowed();
bool winograd();
int64_t blocked_channels();
mdesc blocked_md(const mdims& d);
bool winograd_geometry(const ConvDims& d, const Epilogue& epi);
int own_winograd_tile(const ConvDims& d);
bool own_winograd(const ConvDims& d, const Epilogue& epi);
Layouts layouts(const mdims& src, bool inference);
mdesc want_md(const mdims& d, bool plain);
Operand make_operand(int arg, const mdesc& user, const mdesc& prim, bool is_output);
dnnl::convolution_forward::primitive_desc forward_pd(const ConvDims& d, bool bias, bool inference, Epilogue epi);
std::shared_ptr<Plan> build(Kind kind, const ConvDims& d, bool bias, Epilogue epi);
std::string key_of(Kind kind, const ConvDims& d, bool bias, Epilogue epi, int threads);
std::shared_ptr<const Plan> plan_for(const std::string& key, Kind kind, const ConvDims& d, bool bias, Epilogue epi);
std::string weights_tag(const mdesc& md, const std::string& plan_key, bool folded, int64_t part);
std::vector<Tensor> prepared(const Plan& plan, const std::string& plan_key, const WeightsIn& wi, int64_t part = 0);
void execute(const Plan& plan, void* in0, void* in1, void* out, void* bias, bool in1_ready);

// conv_onednn_split.cpp
bool run_by_channels(const ConvDims& d, bool bias, void* x, void* out, Epilogue epi, const WeightsIn& wi);
bool run_by_rows(const ConvDims& d, bool bias, void* x, void* out, void* b, Epilogue epi, const WeightsIn& wi);

// conv_onednn.cpp
int64_t per_sample(const mdims& d);
bool run(Kind kind, const ConvDims& d, bool bias, void* in0, void* in1, void* out, void* b, Epilogue epi = {},
         const WeightsIn* wi = nullptr);

}  // namespace loom::cpu::dnnl_conv
