// The convolution's inference path (src/ops/cpu/conv_onednn.cpp): forward_inference
// primitives with weights prepared once (onednn::prepared_weights, keyed on the weight
// storage's identity and version), the fused conv + batch norm + residual + ReLU entry
// (src/ops/conv_fused.h), and a whole ResNet-18 under NoGrad against the same network with
// gradients enabled (training primitives, no prepared weights).
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/nn/mode.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/normalization.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/optimizers.h>
#include <loom/zoo/architectures.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

#include "ops/conv_fused.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/onednn.h"

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

using loom_test::ThreadsScope;

struct Geo {
  int64_t n, c, h, w, oc, k, stride, pad, dilation, groups;
  bool bias;
};

// stem-like (3 and 1 input channels: plain input), 3x3, 1x1 downsample, strided, dilated,
// grouped and depthwise, batch 1 and batches that split over the threads unevenly
const Geo kGeos[] = {
    {1, 3, 32, 32, 16, 7, 2, 3, 1, 1, false}, {3, 3, 20, 18, 8, 7, 2, 3, 1, 1, true},
    {2, 1, 12, 12, 8, 3, 1, 1, 1, 1, true},   {1, 16, 10, 10, 16, 3, 1, 1, 1, 1, false},
    {3, 16, 9, 11, 32, 3, 2, 1, 1, 1, true},  {2, 16, 8, 8, 32, 1, 2, 0, 1, 1, false},
    {1, 16, 12, 12, 16, 3, 1, 2, 2, 1, true}, {2, 16, 8, 8, 32, 3, 1, 1, 1, 4, true},
    {1, 16, 8, 8, 16, 3, 1, 1, 1, 16, false},
    // batch 1 with >= 32 output channels: split by output channels over the threads, unevenly
    {1, 3, 30, 30, 64, 7, 2, 3, 1, 1, false}, {1, 16, 10, 10, 48, 3, 1, 1, 1, 1, true},
};

std::string name(const Geo& g) {
  return "n" + std::to_string(g.n) + " c" + std::to_string(g.c) + " oc" + std::to_string(g.oc) + " k" +
         std::to_string(g.k) + " s" + std::to_string(g.stride) + " p" + std::to_string(g.pad) + " d" +
         std::to_string(g.dilation) + " g" + std::to_string(g.groups);
}

Tensor reference(const Tensor& x, const Tensor& w, const Tensor& b, const Geo& g) {
  NoGrad off;
  return conv2d(x.astype(Float64), w.astype(Float64), b.defined() ? b.astype(Float64) : Tensor(), g.stride, g.pad,
                g.dilation, g.groups);
}

bool close(const Tensor& f32, const Tensor& f64) { return allclose(f32.astype(Float64), f64, 1e-4, 1e-4); }

TEST(ConvInference, EqualsTrainingForwardAndReference) {
  for (int threads : {1, 2}) {
    ThreadsScope ts(threads);
    for (const Geo& g : kGeos) {
      const Tensor x = uniform({g.n, g.c, g.h, g.w}, -1, 1);
      const Tensor w = uniform({g.oc, g.c / g.groups, g.k, g.k}, -0.5, 0.5);
      const Tensor b = g.bias ? uniform({g.oc}) : Tensor();
      Tensor inf;
      {
        NoGrad off;
        inf = conv2d(x, w, b, g.stride, g.pad, g.dilation, g.groups);
      }
      Tensor wt = w.detach().requires_grad_(true);
      Tensor train = conv2d(x, wt, b, g.stride, g.pad, g.dilation, g.groups);  // recorded: training primitive
      const Tensor ref = reference(x, w, b, g);
      EXPECT_TRUE(close(inf, ref)) << name(g) << " threads " << threads;
      EXPECT_TRUE(allclose(inf, train.detach(), 1e-5, 1e-5)) << name(g) << " threads " << threads;
    }
  }
}

TEST(ConvInference, PreparedWeightsFollowInPlaceChanges) {
  const Geo g{2, 16, 10, 10, 32, 3, 1, 1, 1, 1, false};
  const Tensor x = uniform({g.n, g.c, g.h, g.w}, -1, 1);
  // the weight is a view into a larger buffer: writes through another view of it count too
  Tensor buffer = uniform({2 * g.oc, g.c, g.k, g.k}, -0.5, 0.5);
  Tensor w = slice(buffer, 0, g.oc, 2 * g.oc).detach().requires_grad_(true);
  auto infer = [&] {
    NoGrad off;
    return conv2d(x, w, Tensor(), g.stride, g.pad);
  };
  auto check = [&](const char* what) {
    const Tensor y = infer();
    EXPECT_TRUE(close(y, reference(x, w.detach(), Tensor(), g))) << what;
    return y;
  };
  Tensor before = check("initial");
  EXPECT_TRUE(array_equal(before, infer())) << "a second call with unchanged weights";
  {
    NoGrad off;
    w *= 2.0;
  }
  Tensor after = check("after w *= 2");
  EXPECT_TRUE(allclose(after, before * 2.0, 1e-5, 1e-5));
  {
    NoGrad off;
    w.copy_(uniform(w.shape(), -0.5, 0.5));
  }
  check("after copy_");
  {
    NoGrad off;
    slice(buffer, 0, g.oc, 2 * g.oc).fill_(0.25);  // another view of the same storage
  }
  check("after fill_ through another view");
  // an optimizer step (its fused loop writes through raw pointers)
  train::SGD opt({w}, {.lr = 0.5});
  Tensor loss = sum(square(conv2d(x, w, Tensor(), g.stride, g.pad)));
  loss.backward();
  const Tensor stepped = infer();
  opt.step();
  const Tensor y = check("after an SGD step");
  EXPECT_FALSE(allclose(y, stepped, 1e-3, 1e-3)) << "the step changed the weights";
}

TEST(ConvInference, PreparedWeightsOfDeadTensorsAreDropped) {
  auto& cache = cpu::onednn::prepared_weights();
  cache.clear();
  const Tensor x = uniform({1, 16, 8, 8});
  NoGrad off;
  for (int i = 0; i < 20; ++i) {
    Tensor w = uniform({16, 16, 3, 3});
    conv2d(x, w, Tensor(), 1, 1);
  }
  EXPECT_LE(cache.entries(), 1u);  // the last one, dropped when the next entry comes in
  EXPECT_LE(cache.bytes(), cpu::onednn::PreparedCache::kMaxBytes);
  Tensor w = uniform({16, 16, 3, 3});
  conv2d(x, w, Tensor(), 1, 1);
  conv2d(x, w, Tensor(), 1, 1);
  EXPECT_LE(cache.entries(), 1u);
}

// Under detail::PreparedWeightsNotKept the same results, and nothing kept: what the graph
// compiler's shape runs use, so a specialized compile leaves no weights prepared for layouts
// the plan's runs never ask for.
TEST(ConvInference, PreparedWeightsNotKeptComputesTheSameAndKeepsNothing) {
  auto& cache = cpu::onednn::prepared_weights();
  cache.clear();
  const Tensor x = uniform({2, 16, 8, 8}), w = uniform({16, 16, 3, 3});
  NoGrad off;
  Tensor once;
  {
    detail::PreparedWeightsNotKept scope;
    {
      detail::PreparedWeightsNotKept nested;
    }
    once = conv2d(x, w, Tensor(), 1, 1);  // still not kept after the nested scope ended
  }
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_TRUE(array_equal(conv2d(x, w, Tensor(), 1, 1), once));
  EXPECT_EQ(cache.entries(), 1u);

  cache.clear();
  manual_seed(3);
  zoo::Network net = zoo::resnet({1, 1, 1, 1}, 5, 3, "resnet_compile_cache");
  EXPECT_EQ(cache.entries(), 0u);
  const Plan plan = net.graph.compile({{8, 3, 32, 32}});  // probes at batches 1 and 2
  EXPECT_TRUE(plan.dump().find("(8, 512, 1, 1)") != std::string::npos) << plan.dump();
  EXPECT_EQ(cache.entries(), 0u);
}

struct BnParams {
  Tensor gamma, beta, mean, var;
};

BnParams bn_params(int64_t oc, bool affine) {
  BnParams p;
  if (affine) {
    p.gamma = uniform({oc}, 0.5, 1.5);
    p.beta = uniform({oc}, -0.5, 0.5);
  }
  p.mean = uniform({oc}, -0.3, 0.3);
  p.var = uniform({oc}, 0.2, 2.0);
  return p;
}

// conv2d -> batch_norm (eval) -> + residual -> relu in float64, the unfused ops
Tensor fused_reference(const Tensor& x, const Tensor& w, const Tensor& b, const Geo& g, const BnParams* bn,
                       const Tensor& residual, bool relu_) {
  NoGrad off;
  auto d = [](const Tensor& t) { return t.defined() ? t.astype(Float64) : Tensor(); };
  Tensor y = reference(x, w, b, g);
  if (bn) y = batch_norm(y, d(bn->mean), d(bn->var), d(bn->gamma), d(bn->beta), false, 0.1, 1e-5);
  if (residual.defined()) y = y + d(residual);
  return relu_ ? relu(y) : y;
}

TEST(ConvFused, EqualsUnfusedOps) {
  for (int threads : {1, 2}) {
    ThreadsScope ts(threads);
    for (const Geo& g : kGeos)
      for (int variant = 0; variant < 4; ++variant) {
        const bool use_bn = variant != 3, affine = variant != 1, use_res = variant >= 1, relu_ = variant != 2;
        const Tensor x = uniform({g.n, g.c, g.h, g.w}, -1, 1);
        const Tensor w = uniform({g.oc, g.c / g.groups, g.k, g.k}, -0.5, 0.5);
        const Tensor b = g.bias ? uniform({g.oc}) : Tensor();
        const BnParams bn = bn_params(g.oc, affine);
        const Shape out{g.n, g.oc, conv_output_size(g.h, g.k, g.stride, g.pad, g.pad, g.dilation),
                        conv_output_size(g.w, g.k, g.stride, g.pad, g.pad, g.dilation)};
        const Tensor residual = use_res ? uniform(out, -1, 1) : Tensor();
        detail::FusedConv e;
        if (use_bn) e = {bn.gamma, bn.beta, bn.mean, bn.var, 1e-5, Tensor(), false};
        e.residual = residual;
        e.relu = relu_;
        const Tensor ref = fused_reference(x, w, b, g, use_bn ? &bn : nullptr, residual, relu_);
        const std::string what = name(g) + " variant " + std::to_string(variant) + " threads " + std::to_string(threads);
        Tensor y;
        {
          NoGrad off;
          y = detail::conv2d_fused(x, w, b, e, g.stride, g.pad, g.dilation, g.groups);
        }
        EXPECT_TRUE(close(y, ref)) << what;
        // with gradients: the unfused, differentiable ops
        Tensor wg = w.detach().requires_grad_(true);
        Tensor yg = detail::conv2d_fused(x, wg, b, e, g.stride, g.pad, g.dilation, g.groups);
        EXPECT_TRUE(yg.requires_grad()) << what;
        EXPECT_TRUE(close(yg.detach(), ref)) << what;
      }
  }
}

TEST(ConvFused, FoldedBatchNormFollowsInPlaceChanges) {
  const Geo g{1, 16, 8, 8, 16, 3, 1, 1, 1, 1, true};
  const Tensor x = uniform({g.n, g.c, g.h, g.w}, -1, 1);
  const Tensor w = uniform({g.oc, g.c, g.k, g.k}, -0.5, 0.5), b = uniform({g.oc});
  BnParams bn = bn_params(g.oc, true);
  const detail::FusedConv e{bn.gamma, bn.beta, bn.mean, bn.var, 1e-5, Tensor(), true};
  NoGrad off;
  for (int step = 0; step < 3; ++step) {
    const Tensor y = detail::conv2d_fused(x, w, b, e, g.stride, g.pad);
    EXPECT_TRUE(close(y, fused_reference(x, w, b, g, &bn, Tensor(), true))) << "step " << step;
    if (step == 0) bn.var *= 4.0;  // as batch norm's running statistics are updated in place
    if (step == 1) bn.gamma.fill_(-1.0);
  }
}

TEST(ConvFused, RejectsBadEpilogues) {
  const Tensor x = uniform({1, 4, 6, 6}), w = uniform({8, 4, 3, 3});
  detail::FusedConv e;
  e.residual = uniform({1, 8, 5, 5});
  EXPECT_THROW(detail::conv2d_fused(x, w, Tensor(), e, 1, 1), ShapeError);
  detail::FusedConv m;
  m.bn_mean = zeros({8});
  EXPECT_THROW(detail::conv2d_fused(x, w, Tensor(), m, 1, 1), ValueError);
  detail::FusedConv s{ones({8}), Tensor(), zeros({7}), ones({7}), 1e-5, Tensor(), false};
  EXPECT_THROW(detail::conv2d_fused(x, w, Tensor(), s, 1, 1), ShapeError);
}

// Blocked activations (the graph compiler's, conv_fused.h): the layout is N, C/B, H, W, B (B 8 or
// 16), or NHWC where the primitives pick it (B reported as 1); the fused entry reading x and
// writing out (with the residual) blocked gives the plain call's values once converted back, on
// batch slices (batch 3, 2 threads) and one sample on 2 threads (batch 1, 64 channels: channel
// parts, or row parts where the layout is NHWC); a call the kernel cannot run blocked (groups)
// converts around the unfused ops.
TEST(ConvFused, BlockedOperandsEqualPlain) {
  const Tensor probe = zeros({1, 16, 4, 4}), probe_w = zeros({16, 16, 1, 1});
  int64_t block = 0;
  {
    ThreadsScope one(1);  // at one thread any batch may be blocked, NHWC (block 1) included
    block = detail::conv2d_fused_blocked(probe, probe_w, 1, 0, 1, 1);
  }
  if (block == 0) GTEST_SKIP() << "no blocked layout on this backend";
  const int64_t C = block == 1 ? 16 : 2 * block, H = 3, W = 5;
  // the layout itself: element (n, c, h, w) at ((n * C / B + c / B) * H * W + h * W + w) * B + c % B,
  // or for NHWC at ((n * H + h) * W + w) * C + c
  auto at = [&](int64_t n, int64_t c, int64_t i) {
    return block == 1 ? (n * H * W + i) * C + c : ((n * C / block + c / block) * H * W + i) * block + c % block;
  };
  const Tensor x0 = uniform({2, C, H, W});
  const Tensor xb = detail::reorder_blocked(x0, false);
  const float* pb = xb.data<float>();
  const float* p0 = x0.data<float>();
  bool laid_out = true;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H * W; ++i) laid_out = laid_out && pb[at(n, c, i)] == p0[(n * C + c) * H * W + i];
  EXPECT_TRUE(laid_out);
  EXPECT_TRUE(array_equal(detail::reorder_blocked(xb, true), x0));
  NoGrad off;
  struct Case {
    int64_t n, c, oc, stride, groups;
    int threads;
  };
  for (const Case& k : {Case{1, C, 64, 1, 1, 2}, Case{3, C, C, 2, 1, 2}, Case{3, C, C, 1, 1, 1}, Case{2, C, C, 1, 2, 2}}) {
    ThreadsScope ts(k.threads);
    const Tensor x = uniform({k.n, k.c, 9, 9}, -1, 1);
    const Tensor w = uniform({k.oc, k.c / k.groups, 3, 3}, -0.5, 0.5), b = uniform({k.oc});
    const BnParams bn = bn_params(k.oc, true);
    const Shape out{k.n, k.oc, (9 + 2 - 3) / k.stride + 1, (9 + 2 - 3) / k.stride + 1};
    detail::FusedConv e{bn.gamma, bn.beta, bn.mean, bn.var, 1e-5, uniform(out, -1, 1), true};
    const Tensor plain = detail::conv2d_fused(x, w, b, e, k.stride, 1, 1, k.groups);
    const int64_t can = detail::conv2d_fused_blocked(x, w, k.stride, 1, 1, k.groups);
    // NHWC with fewer samples than threads: offered for one sample (its rows split over the threads)
    EXPECT_EQ(can, k.groups == 1 && !(block == 1 && k.n < k.threads && k.n != 1) ? block : 0);
    const detail::BlockedStats before = detail::blocked_stats();
    detail::FusedConv eb = e;
    eb.x_blocked = eb.out_blocked = true;
    eb.residual = detail::reorder_blocked(e.residual, false);
    const Tensor yb = detail::conv2d_fused(detail::reorder_blocked(x, false), w, b, eb, k.stride, 1, 1, k.groups);
    const Tensor y = detail::reorder_blocked(yb, true);
    const std::string what = "n" + std::to_string(k.n) + " oc" + std::to_string(k.oc) + " groups " + std::to_string(k.groups);
    EXPECT_LE(max(abs(y - plain)).item<double>(), 1e-5 * (1.0 + max(abs(plain)).item<double>())) << what;
    const detail::BlockedStats after = detail::blocked_stats();
    // 3 reorders here; the grouped call is not run blocked: 3 more in its fallback (x, residual, out)
    EXPECT_EQ(after.fused_calls - before.fused_calls, k.groups == 1 ? 1 : 0) << what;
    EXPECT_EQ(after.reorders - before.reorders, k.groups == 1 ? 3 : 6) << what;
  }
  // an image (3 channels, plain) into a blocked output, as ResNet's stem: one sample on 1 and 2
  // threads (rows split where NHWC) and a batch
  for (const Case& k : {Case{1, 3, C, 2, 1, 1}, Case{1, 3, C, 2, 1, 2}, Case{3, 3, C, 1, 1, 1}}) {
    ThreadsScope ts(k.threads);
    const Tensor x = uniform({k.n, 3, 13, 13}, -1, 1);
    const Tensor w = uniform({k.oc, 3, 7, 7}, -0.5, 0.5), b = uniform({k.oc});
    const BnParams bn = bn_params(k.oc, true);
    const int64_t side = (13 + 6 - 7) / k.stride + 1;
    detail::FusedConv e{bn.gamma, bn.beta, bn.mean, bn.var, 1e-5, Tensor(), true};
    const Tensor plain = detail::conv2d_fused(x, w, b, e, k.stride, 3, 1, 1);
    ASSERT_EQ(detail::conv2d_fused_blocked(x, w, k.stride, 3, 1, 1), block);
    detail::FusedConv eb = e;
    eb.out_blocked = true;
    const Tensor y = detail::reorder_blocked(detail::conv2d_fused(x, w, b, eb, k.stride, 3, 1, 1), true);
    ASSERT_EQ(y.shape(), (Shape{k.n, k.oc, side, side}));
    EXPECT_LE(max(abs(y - plain)).item<double>(), 1e-5 * (1.0 + max(abs(plain)).item<double>()))
        << "image, n" << k.n << " threads " << k.threads;
  }
}

// The operands of one sample's fused convolution split into parts: input, weights, bias, batch
// norm (folded with `fold`), and the epilogue (a residual and ReLU).
namespace {
struct RowPartsCase {
  Tensor x, w, b;
  BnParams bn;
  detail::FusedConv e;
};
RowPartsCase row_parts_case(const Geo& g, bool fold) {
  RowPartsCase c{uniform({g.n, g.c, g.h, g.w}, -1, 1), uniform({g.oc, g.c, g.k, g.k}, -0.5, 0.5),
                 g.bias ? uniform({g.oc}) : Tensor(), bn_params(g.oc, true), {}};
  const Shape out{g.n, g.oc, conv_output_size(g.h, g.k, g.stride, g.pad, g.pad, g.dilation),
                  conv_output_size(g.w, g.k, g.stride, g.pad, g.pad, g.dilation)};
  if (fold) c.e = {c.bn.gamma, c.bn.beta, c.bn.mean, c.bn.var, 1e-5, Tensor(), false};
  c.e.residual = uniform(out, -1, 1);
  c.e.relu = true;
  return c;
}
}  // namespace

// One sample on two threads where the activations are NHWC: the output rows split over the
// threads (each part reads its rows' input with the kernel's halo, padded only at the image's
// edges) give the whole call's values, for plain and NHWC operands, with a residual and ReLU, and
// for geometries whose parts are 1 row, strided, dilated or of another kernel size.
TEST(ConvFused, OneSampleRowPartsEqualTheWholeCall) {
  int64_t block = 0;
  {
    ThreadsScope one(1);
    block = detail::conv2d_fused_blocked(zeros({1, 16, 4, 4}), zeros({16, 16, 1, 1}), 1, 0, 1, 1);
  }
  if (block != 1) GTEST_SKIP() << "the activations are not NHWC on this CPU (block " << block << ")";
  const Geo geos[] = {
      {1, 16, 9, 9, 32, 3, 1, 1, 1, 1, true},  {1, 16, 9, 9, 32, 3, 2, 1, 1, 1, false},
      {1, 16, 3, 4, 16, 3, 2, 1, 1, 1, true},  // 2 output rows: one per part
      {1, 16, 5, 7, 16, 5, 3, 2, 1, 1, false}, {1, 16, 8, 8, 32, 1, 2, 0, 1, 1, false},
      {1, 16, 12, 10, 16, 3, 1, 2, 2, 1, true}, {1, 16, 7, 7, 16, 3, 1, 0, 1, 1, false},
      {1, 3, 23, 21, 16, 7, 2, 3, 1, 1, false},  // stem-like: a plain image in
  };
  for (const Geo& g : geos)
    for (int variant = 0; variant < 3; ++variant) {  // plain; NHWC out (and in, from 16 channels); NHWC, BN folded
      const RowPartsCase c = row_parts_case(g, variant == 2);
      const Tensor &x = c.x, &w = c.w, &b = c.b;
      const BnParams& bn = c.bn;
      const detail::FusedConv& e = c.e;
      const std::string what = name(g) + " variant " + std::to_string(variant);
      NoGrad off;
      detail::FusedConv eb = e;
      const bool blocked = variant > 0 && detail::conv2d_fused_blocked(x, w, g.stride, g.pad, g.dilation, 1) == 1;
      eb.x_blocked = blocked && g.c >= 16;
      eb.out_blocked = blocked;
      if (blocked) eb.residual = detail::reorder_blocked(e.residual, false);
      auto run = [&](int threads) {
        ThreadsScope ts(threads);
        const Tensor xin = eb.x_blocked ? detail::reorder_blocked(x, false) : x;
        const Tensor y = detail::conv2d_fused(xin, w, b, eb, g.stride, g.pad, g.dilation, 1);
        return blocked ? detail::reorder_blocked(y, true) : y;
      };
      const Tensor whole = run(1);
      const int64_t splits = cpu::conv2d_row_split_calls();
      const Tensor parts = run(2);
      EXPECT_EQ(cpu::conv2d_row_split_calls(), splits + 1) << what;
      EXPECT_LE(max(abs(parts - whole)).item<double>(), 1e-5 * (1.0 + max(abs(whole)).item<double>())) << what;
      EXPECT_TRUE(close(parts, fused_reference(x, w, b, g, variant == 2 ? &bn : nullptr, e.residual, true))) << what;
    }
}

// Where the activations are nChw16c and oneDNN runs Winograd (AVX-512), one sample's 3x3
// stride-1 convolutions from 32 output rows split by rows over 2 threads, each part copied into
// and out of dense buffers: the parts give the whole call's values (their tiles are the whole
// call's), with a residual and ReLU, batch norm folded, and output heights that do not split
// into equal multiples of 4.
TEST(ConvFused, OneSampleWinogradRowPartsEqualTheWholeCall) {
  int64_t block = 0;
  {
    ThreadsScope one(1);
    block = detail::conv2d_fused_blocked(zeros({1, 16, 4, 4}), zeros({16, 16, 1, 1}), 1, 0, 1, 1);
  }
  if (block != 16 || !cpu::conv2d_winograd())
    GTEST_SKIP() << "no oneDNN Winograd on nChw16c on this CPU (block " << block << ")";
  const Geo geos[] = {
      {1, 64, 56, 56, 64, 3, 1, 1, 1, 1, false},
      {1, 16, 33, 35, 32, 3, 1, 1, 1, 1, true},  // parts of 16 and 17 rows
      {1, 32, 41, 20, 16, 3, 1, 1, 1, 1, true},  // 20 and 21 rows (40 / 2 on a multiple of 4)
  };
  for (const Geo& g : geos)
    for (bool fold : {false, true}) {
      const RowPartsCase c = row_parts_case(g, fold);
      const Tensor &x = c.x, &w = c.w, &b = c.b;
      const BnParams& bn = c.bn;
      const detail::FusedConv& e = c.e;
      const std::string what = name(g) + (fold ? " folded" : "");
      NoGrad off;
      detail::FusedConv eb = e;
      eb.x_blocked = eb.out_blocked = true;
      eb.residual = detail::reorder_blocked(e.residual, false);
      auto run = [&](int threads) {
        ThreadsScope ts(threads);
        return detail::reorder_blocked(detail::conv2d_fused(detail::reorder_blocked(x, false), w, b, eb, g.stride, g.pad,
                                                            g.dilation, 1),
                                       true);
      };
      const Tensor whole = run(1);
      const int64_t splits = cpu::conv2d_row_split_calls();
      const Tensor parts = run(2);
      EXPECT_EQ(cpu::conv2d_row_split_calls(), splits + 1) << what;
      EXPECT_LE(max(abs(parts - whole)).item<double>(), 1e-5 * (1.0 + max(abs(whole)).item<double>())) << what;
      EXPECT_TRUE(close(parts, fused_reference(x, w, b, g, fold ? &bn : nullptr, e.residual, true))) << what;
    }
}

// Inference plans on blocked activations run 3x3 stride-1 convolutions on Winograd kernels
// (oneDNN's on AVX-512, nChw16c; Loom's F(2x2, 3x3) on nChw8c, where oneDNN has none): the
// results equal the float64 reference as the direct kernels' do, with a residual, ReLU and
// batch norm folded in, odd output sizes (a partial last tile), for a batch and for one sample
// at 1 and 2 threads.
TEST(ConvFused, WinogradThreeByThreeEqualsTheReference) {
  if (!cpu::conv2d_winograd()) GTEST_SKIP() << "no Winograd kernels on this CPU (or LOOM_CONV_WINOGRAD=0)";
  const Geo geos[] = {
      {2, 64, 14, 14, 64, 3, 1, 1, 1, 1, true}, {1, 32, 9, 11, 48, 3, 1, 1, 1, 1, false},
      {1, 128, 7, 7, 128, 3, 1, 1, 1, 1, false}, {3, 16, 28, 28, 32, 3, 1, 1, 1, 1, true},
  };
  for (const Geo& g : geos)
    for (int threads : {1, 2})
      for (bool fold : {false, true}) {
        const Tensor x = uniform({g.n, g.c, g.h, g.w}, -1, 1);
        const Tensor w = uniform({g.oc, g.c, g.k, g.k}, -0.5, 0.5);
        const Tensor b = g.bias ? uniform({g.oc}) : Tensor();
        const BnParams bn = bn_params(g.oc, true);
        const Shape out{g.n, g.oc, g.h, g.w};
        detail::FusedConv e;
        if (fold) e = {bn.gamma, bn.beta, bn.mean, bn.var, 1e-5, Tensor(), false};
        e.residual = uniform(out, -1, 1);
        e.relu = true;
        const std::string what = name(g) + " threads " + std::to_string(threads) + (fold ? " folded" : "");
        NoGrad off;
        ThreadsScope ts(threads);
        const int64_t block = detail::conv2d_fused_blocked(x, w, 1, 1, 1, 1);
        ASSERT_TRUE(block == 8 || block == 16) << what << ": block " << block;  // nChw8c (Loom's kernels) or nChw16c
        detail::FusedConv eb = e;
        eb.x_blocked = eb.out_blocked = true;
        eb.residual = detail::reorder_blocked(e.residual, false);
        const Tensor y = detail::reorder_blocked(
            detail::conv2d_fused(detail::reorder_blocked(x, false), w, b, eb, g.stride, g.pad, g.dilation, 1), true);
        EXPECT_TRUE(close(y, fused_reference(x, w, b, g, fold ? &bn : nullptr, e.residual, true))) << what;
      }
  // Wide layers (256 and 512 channels, batch norm folded): Winograd's float32 error grows with
  // the layer's largest terms, not with each output, so near-zero outputs of such a layer can
  // miss the elementwise tolerance above while the layer as a whole is as close as the direct
  // kernels: at most 1e-5 of the largest output (F(4x4) measured 2.3e-6 to 4.1e-6 with these
  // operands, F(2x2) 4e-7 to 8e-7, oneDNN's direct kernels 1.4e-6 to 2.6e-6; docs/kernels.md).
  // The ctest entries conv_winograd_f4 / conv_winograd_f2 run this with each tile forced.
  {
    const Geo wide[] = {{4, 256, 14, 14, 256, 3, 1, 1, 1, 1, false}, {1, 512, 7, 7, 512, 3, 1, 1, 1, 1, false}};
    NoGrad off;
    for (const Geo& g : wide) {
      const Tensor x = uniform({g.n, g.c, g.h, g.w}, -1, 1), w = uniform({g.oc, g.c, 3, 3}, -0.5, 0.5);
      const BnParams bn = bn_params(g.oc, true);
      detail::FusedConv eb{bn.gamma, bn.beta, bn.mean, bn.var, 1e-5, Tensor(), false};
      eb.x_blocked = eb.out_blocked = true;
      const Tensor y = detail::reorder_blocked(
          detail::conv2d_fused(detail::reorder_blocked(x, false), w, Tensor(), eb, 1, 1, 1, 1), true);
      const Tensor ref = fused_reference(x, w, Tensor(), g, &bn, Tensor(), false);
      const double scale = abs(ref).max().item<double>(), err = abs(y.astype(Float64) - ref).max().item<double>();
      EXPECT_LE(err, 1e-5 * scale) << name(g) << ": max error " << err << " against a largest output of " << scale;
    }
  }
  // a new geometry builds a new plan on the Winograd kernels (plans are cached by geometry)
  NoGrad off;
  ThreadsScope one(1);  // one part: one plan
  const int64_t before = cpu::conv2d_winograd_plans();
  const Tensor x = uniform({1, 80, 6, 6}, -1, 1), w = uniform({80, 80, 3, 3}, -0.5, 0.5);
  detail::FusedConv eb;
  eb.x_blocked = eb.out_blocked = true;
  detail::conv2d_fused(detail::reorder_blocked(x, false), w, Tensor(), eb, 1, 1, 1, 1);
  EXPECT_EQ(cpu::conv2d_winograd_plans(), before + 1);
  // Loom's own kernels (nChw8c) decline a layer whose transformed weights would be streamed for
  // too few tiles: one sample's 7x7 512-channel layer (16.8 MB of F(2x2) weights for 16 tiles)
  // runs the direct kernel, the same layer at batch 8 (128 tiles) Winograd; a forced tile
  // (LOOM_CONV_WINOGRAD_TILE, the ctest entries conv_winograd_f2 / _f4) takes every geometry.
  if (detail::conv2d_fused_blocked(x, w, 1, 1, 1, 1) == 8 && !std::getenv("LOOM_CONV_WINOGRAD_TILE")) {
    const Tensor w512 = uniform({512, 512, 3, 3}, -0.5, 0.5);
    for (int64_t n : {1, 8}) {
      const Tensor xn = uniform({n, 512, 7, 7}, -1, 1);
      const int64_t plans = cpu::conv2d_winograd_plans();
      const Tensor y = detail::reorder_blocked(
          detail::conv2d_fused(detail::reorder_blocked(xn, false), w512, Tensor(), eb, 1, 1, 1, 1), true);
      EXPECT_EQ(cpu::conv2d_winograd_plans(), plans + (n == 1 ? 0 : 1)) << "batch " << n;
      const Tensor ref = conv2d(xn, w512, Tensor(), 1, 1);
      EXPECT_LE(abs(y - ref).max().item<double>(), 1e-5 * abs(ref).max().item<double>()) << "batch " << n;
    }
  }
}

// Inference on one sample starts no OpenMP team beside Loom's pool (a team's workers would spin
// on the cores the pool needs): ResNet-18 at 1 and 2 threads, whole calls and split ones, leaves
// the process with as many threads as before (plans are built for the team size they run with,
// whichever thread builds them).
TEST(ConvInference, OneSampleStartsNoOpenMPTeam) {
  auto threads_now = [] {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
  };
  manual_seed(5);
  zoo::Network net = zoo::resnet18(10);  // weights large enough for oneDNN to reorder them in parallel
  const Tensor x = uniform({1, 3, 32, 32});
  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad off;
  for (int threads : {1, 2}) {
    ThreadsScope t(threads);
    parallel_for(0, threads, 1, [](int64_t, int64_t) {});  // Loom's pool has its workers
    const int before = threads_now();
    net(x);
    EXPECT_EQ(threads_now(), before) << "threads " << threads;
  }
}

// Max pooling in the blocked layout (the graph compiler's, between a convolution and the ones
// reading the pool): bitwise max_pool2d's values once converted back, NaN and -inf included, over
// kernels, strides, paddings and ceil_mode, one and several samples, 1 and 2 threads.
TEST(ConvFused, BlockedMaxPoolEqualsMaxPool) {
  int64_t block = 0;
  {
    ThreadsScope one(1);
    block = detail::conv2d_fused_blocked(zeros({1, 16, 4, 4}), zeros({16, 16, 1, 1}), 1, 0, 1, 1);
  }
  if (block == 0) GTEST_SKIP() << "no blocked layout on this backend";
  const int64_t C = block == 1 ? 24 : 2 * block;
  struct Case {
    int64_t n, h, w, k, stride, pad;
    bool ceil;
  };
  for (int threads : {1, 2})
    for (const Case& k : {Case{1, 12, 12, 3, 2, 1, false}, Case{3, 9, 7, 3, 2, 1, true}, Case{2, 8, 8, 2, 2, 0, false},
                          Case{1, 5, 6, 3, 1, 1, false}, Case{2, 7, 9, 1, 3, 0, true}}) {
      ThreadsScope ts(threads);
      NoGrad off;
      Tensor x = uniform({k.n, C, k.h, k.w}, -1, 1);
      float* xp = x.data<float>();
      xp[3] = std::numeric_limits<float>::quiet_NaN();  // row 0, column 3: in a window of every case
      xp[x.numel() - 3] = -std::numeric_limits<float>::infinity();
      const Tensor want = max_pool2d(x, k.k, k.stride, k.pad, 1, k.ceil);
      const detail::BlockedStats before = detail::blocked_stats();
      const Tensor got = detail::reorder_blocked(
          detail::max_pool2d_blocked(detail::reorder_blocked(x, false), k.k, k.stride, k.pad, k.ceil), true);
      const std::string what = "n" + std::to_string(k.n) + " k" + std::to_string(k.k) + " s" + std::to_string(k.stride) +
                               " p" + std::to_string(k.pad) + " threads " + std::to_string(threads);
      EXPECT_EQ(detail::blocked_stats().pools, before.pools + 1) << what;
      ASSERT_EQ(got.shape(), want.shape()) << what;
      EXPECT_TRUE(allclose(got, want, 0.0, 0.0, /*equal_nan=*/true)) << what;  // bitwise, NaN where max_pool2d has it
      const float* w = want.data<float>();
      EXPECT_TRUE(std::any_of(w, w + want.numel(), [](float v) { return std::isnan(v); })) << what;
    }
  EXPECT_THROW(detail::max_pool2d_blocked(zeros({1, C, 4, 4}), 3, 1, 2, false), ShapeError);
}

// A residual the caller gives up (FusedConv::write_into_residual, the graph plan's in-place step)
// becomes the output when nothing else holds it, with the values of a call that copies it; one
// still held elsewhere is left as it was.
TEST(ConvFused, WritesIntoAResidualGivenUp) {
  for (int threads : {1, 2})
    for (int64_t n : {1, 3}) {
      ThreadsScope ts(threads);
      NoGrad off;
      const Tensor x = uniform({n, 16, 8, 8}, -1, 1), w = uniform({16, 16, 3, 3}, -0.5, 0.5);
      const Tensor r = uniform({n, 16, 8, 8}, -1, 1);
      detail::FusedConv keep;
      keep.residual = r;
      keep.relu = true;
      const Tensor want = detail::conv2d_fused(x, w, Tensor(), keep, 1, 1);
      keep.write_into_residual = true;  // r is still held here: not written
      const Tensor r_before = r.copy();
      const Tensor held = detail::conv2d_fused(x, w, Tensor(), keep, 1, 1);
      EXPECT_NE(held.data_ptr(), r.data_ptr());
      EXPECT_TRUE(array_equal(r, r_before));
      EXPECT_TRUE(array_equal(held, want));
      detail::FusedConv give = keep;
      give.residual = r.copy();
      keep.residual = Tensor();
      const void* buffer = give.residual.data_ptr();
      const Tensor y = detail::conv2d_fused(x, w, Tensor(), give, 1, 1);
      EXPECT_EQ(y.data_ptr(), buffer) << "n " << n << " threads " << threads;
      EXPECT_TRUE(array_equal(y, want)) << "n " << n << " threads " << threads;
    }
}

// The whole network in eval mode: under NoGrad (inference primitives, prepared weights) equal
// to the same forward with gradients enabled (training primitives, weights reordered per call),
// also after an optimizer step changed every weight in place.
TEST(ConvInference, ResNet18NoGradEqualsGradEnabled) {
  manual_seed(3);
  zoo::Network net = zoo::resnet18(10);
  const Tensor x2 = uniform({2, 3, 32, 32});
  const Tensor x1 = slice(x2, 0, 0, 1).copy();  // one sample: split over the threads' rows or channels
  for (int round = 0; round < 2; ++round) {
    for (int threads : {1, 2})
      for (const Tensor& x : {x2, x1}) {
      ThreadsScope ts(threads);
      Tensor fast;
      {
        NoGrad off;
        fast = net(x);
      }
      Tensor slow = net(x);
      ASSERT_TRUE(slow.requires_grad());
      EXPECT_TRUE(allclose(fast, slow.detach(), 1e-4, 1e-4))
          << "round " << round << " threads " << threads << " batch " << x.shape()[0] << ": max diff "
          << max(abs(fast - slow.detach())).item<double>();
    }
    train::SGD opt(net.parameters(), {.lr = 0.01});
    Tensor loss = mean(square(net(x2)));
    loss.backward();
    opt.step();
  }
}

}  // namespace
