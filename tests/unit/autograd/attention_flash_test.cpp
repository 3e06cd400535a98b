// The fused attention kernel (src/ops/cpu/attention_flash.cpp) behind scaled_dot_product_attention:
// values and gradients against the math form (ops/attention_internal.h, the composite of matmul and
// softmax; itself checked against PyTorch by reference_pytorch) across causal / bool / float masks,
// L != S, one and many heads, head sizes 32-128 (and ones that are not a multiple of the vector
// width), float32 and float64, sequences longer than one tile; grouped-query and multi-query
// attention against repeating the key / value heads; seeded dropout; non-contiguous operands;
// the same bits at 1 and 2 threads; refusals; and memory that does not grow with L x S.
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/memory.h>
#include <loom/core/parallel.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/attention.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/attention_internal.h"
#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

struct Args {
  Tensor mask;
  bool causal = false;
  std::optional<double> scale;
  double dropout_p = 0;
  bool gqa = false;
  uint64_t seed = 0;
};

struct Result {
  Tensor out;
  std::vector<Tensor> grads;  // q, k, v
};

// The output and the gradients of q, k, v for cotangent cot, through the fused op or the math form.
Result run(bool math, const Tensor& q, const Tensor& k, const Tensor& v, const Args& a, const Tensor& cot) {
  std::vector<Tensor> in{q.detach().requires_grad_(true), k.detach().requires_grad_(true), v.detach().requires_grad_(true)};
  Generator gen(a.seed);
  Result r;
  r.out = math ? detail::scaled_dot_product_attention_math(in[0], in[1], in[2], a.mask, a.causal, a.scale, a.dropout_p, a.gqa, &gen)
               : scaled_dot_product_attention(in[0], in[1], in[2], a.mask, a.causal, a.scale, a.dropout_p, a.gqa, &gen);
  r.grads = grad(r.out, in, cot);
  return r;
}

// max |a - b| / (atol + rtol |b|) over all elements (<= 1: within tolerance); NaN equal to NaN
double worst(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const std::vector<double> va = astype(a, Float64).to_vector<double>(), vb = astype(b, Float64).to_vector<double>();
  EXPECT_EQ(va.size(), vb.size());
  double w = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    if (std::isnan(va[i]) && std::isnan(vb[i])) continue;
    const double e = std::abs(va[i] - vb[i]) / (atol + rtol * std::abs(vb[i]));
    w = std::max(w, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
  }
  return w;
}

// Fused against the math form, values and the three gradients, at check_ops.py's "reduction"
// tolerance (float32 1e-4 / 1e-5 values, gradients at least the transcendental one is looser, so
// this is stricter).
void expect_matches_math(const Tensor& q, const Tensor& k, const Tensor& v, const Args& a, const std::string& what) {
  const bool f64 = q.dtype() == Float64;
  const double rtol = f64 ? 1e-10 : 1e-4, atol = f64 ? 1e-12 : 1e-5;
  Generator gen(a.seed);
  const Shape os =
      detail::scaled_dot_product_attention_math(q, k, v, a.mask, a.causal, a.scale, a.dropout_p, a.gqa, &gen).shape();
  const Tensor cot = randn(os, q.dtype());
  const Result f = run(false, q, k, v, a, cot), m = run(true, q, k, v, a, cot);
  ASSERT_EQ(f.out.shape(), m.out.shape()) << what;
  EXPECT_LE(worst(f.out, m.out, rtol, atol), 1.0) << what << ": output";
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(f.grads[i].shape(), m.grads[i].shape()) << what << ": " << names[i];
    EXPECT_LE(worst(f.grads[i], m.grads[i], rtol, atol), 1.0) << what << ": " << names[i];
  }
}

template <typename T>
bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const std::vector<T> va = a.to_vector<T>(), vb = b.to_vector<T>();
  return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(T)) == 0;
}

// A bool padding mask (N, 1, 1, S): batch item n keeps its first keep[n] keys.
Tensor padding_mask(const std::vector<int64_t>& keep, int64_t S) {
  std::vector<double> m;
  for (int64_t n : keep)
    for (int64_t j = 0; j < S; ++j) m.push_back(j < n ? 1 : 0);
  return astype(from_vector<double>(m, {static_cast<int64_t>(keep.size()), 1, 1, S}), Bool);
}

}  // namespace

TEST(FlashAttention, MatchesMathFormAcrossShapesMasksAndDtypes) {
  manual_seed(11);
  struct Case {
    int64_t B, H, L, S, E, Ev;
  };
  // one and many heads, L != S, partial tiles (the kernel's tiles are 64 x 64), head sizes 32-128
  // and sizes that are not a multiple of the vector width (padded inside the kernel)
  const std::vector<Case> cases = {{2, 3, 70, 130, 32, 32}, {1, 1, 150, 90, 64, 48}, {2, 2, 33, 200, 128, 128},
                                   {1, 4, 129, 129, 20, 12}, {3, 1, 1, 65, 40, 72}};
  for (DType dt : {Float32, Float64}) {
    for (const Case& c : cases) {
      const Tensor q = randn({c.B, c.H, c.L, c.E}, dt), k = randn({c.B, c.H, c.S, c.E}, dt), v = randn({c.B, c.H, c.S, c.Ev}, dt);
      const std::string what = std::string(dtype_name(dt)) + " B" + std::to_string(c.B) + " H" + std::to_string(c.H) + " L" +
                               std::to_string(c.L) + " S" + std::to_string(c.S) + " E" + std::to_string(c.E) + " Ev" +
                               std::to_string(c.Ev);
      expect_matches_math(q, k, v, {}, what + " no mask");
      expect_matches_math(q, k, v, {.causal = true}, what + " causal");
      expect_matches_math(q, k, v, {.scale = 0.3}, what + " scale 0.3");
      // padding: batch item 0 keeps 1 key (whole tiles masked), the others most of them
      std::vector<int64_t> keep;
      for (int64_t n = 0; n < c.B; ++n) keep.push_back(n == 0 ? 1 : c.S - 7 * n);
      expect_matches_math(q, k, v, {.mask = padding_mask(keep, c.S)}, what + " padding mask");
      // a float mask per head and position, broadcast over the batch
      expect_matches_math(q, k, v, {.mask = randn({c.H, c.L, c.S}, dt)}, what + " float mask");
      // a bool (L, S) mask keeping column 0 (no fully masked row)
      Tensor keep_ls = logical_or(greater(uniform({c.L, c.S}), scalar_tensor(0.4)), reshape(arange(c.S), {1, c.S}) == 0);
      expect_matches_math(q, k, v, {.mask = keep_ls}, what + " bool (L, S) mask");
    }
  }
}

TEST(FlashAttention, BroadcastBatchesAndNonContiguousViews) {
  manual_seed(12);
  for (DType dt : {Float32, Float64}) {
    // 3-d operands, k and v broadcast over q's batch, a transposed q and a strided v
    const Tensor q = randn({2, 1, 40, 16}, dt), k = randn({3, 70, 16}, dt), v = randn({3, 70, 24}, dt);
    expect_matches_math(q, k, v, {}, "broadcast batch");
    const Tensor qt = swapaxes(randn({3, 16, 40}, dt), -1, -2);  // (3, 40, 16), not contiguous
    const Tensor vs = slice(randn({3, 70, 48}, dt), 2, 0, 48, 2);
    ASSERT_FALSE(qt.is_contiguous());
    ASSERT_FALSE(vs.is_contiguous());
    expect_matches_math(qt, k, vs, {.causal = true}, "views");
    // 2-d operands (no batch at all)
    expect_matches_math(randn({9, 8}, dt), randn({77, 8}, dt), randn({77, 5}, dt), {}, "2-d");
  }
}

TEST(FlashAttention, GroupedAndMultiQueryAttentionEqualRepeatedHeads) {
  manual_seed(13);
  for (DType dt : {Float32, Float64}) {
    const Tensor q = randn({2, 6, 50, 32}, dt), k = randn({2, 2, 80, 32}, dt), v = randn({2, 2, 80, 40}, dt);
    // against the math form, which repeats each key / value head over its 3 query heads
    expect_matches_math(q, k, v, {.causal = true, .gqa = true}, "gqa causal");
    expect_matches_math(q, k, v, {.mask = padding_mask({30, 80}, 80), .gqa = true}, "gqa padding");
    // against the fused op on explicitly repeated heads: dk, dv are the sums over each group
    const Tensor cot = randn({2, 6, 50, 40}, dt);
    const Result g = run(false, q, k, v, {.gqa = true}, cot);
    const Tensor kr = repeat(k, 3, 1), vr = repeat(v, 3, 1);
    const Result r = run(false, q, kr, vr, {}, cot);
    const double tol = dt == Float64 ? 1e-12 : 1e-5;
    EXPECT_LE(worst(g.out, r.out, tol, tol), 1.0);
    EXPECT_LE(worst(g.grads[0], r.grads[0], tol, tol), 1.0);
    EXPECT_LE(worst(g.grads[1], sum(reshape(r.grads[1], {2, 2, 3, 80, 32}), {2}), 10 * tol, 10 * tol), 1.0);
    EXPECT_LE(worst(g.grads[2], sum(reshape(r.grads[2], {2, 2, 3, 80, 40}), {2}), 10 * tol, 10 * tol), 1.0);
    // multi-query: one key / value head broadcast over the query heads (no flag needed), or as gqa
    const Tensor k1 = randn({2, 1, 80, 32}, dt), v1 = randn({2, 1, 80, 40}, dt);
    expect_matches_math(q, k1, v1, {.causal = true}, "mqa broadcast");
    expect_matches_math(q, k1, v1, {.causal = true, .gqa = true}, "mqa gqa");
  }
}

TEST(FlashAttention, DropoutIsSeededAndMatchesTheMathFormsDraw) {
  manual_seed(14);
  for (DType dt : {Float32, Float64}) {
    const Tensor q = randn({2, 3, 70, 32}, dt), k = randn({2, 3, 90, 32}, dt), v = randn({2, 3, 90, 32}, dt);
    // the same kept weights as the math form's dropout from a generator of the same seed
    expect_matches_math(q, k, v, {.dropout_p = 0.3, .seed = 5}, "dropout");
    expect_matches_math(q, k, v, {.causal = true, .dropout_p = 0.5, .seed = 6}, "dropout causal");
    // reproducible with a seed, different with another; p = 0 is no dropout
    Generator g1(7), g2(7), g3(8);
    const Tensor a = scaled_dot_product_attention(q, k, v, Tensor(), false, std::nullopt, 0.2, false, &g1);
    const Tensor b = scaled_dot_product_attention(q, k, v, Tensor(), false, std::nullopt, 0.2, false, &g2);
    const Tensor c = scaled_dot_product_attention(q, k, v, Tensor(), false, std::nullopt, 0.2, false, &g3);
    EXPECT_TRUE(dt == Float32 ? bitwise_equal<float>(a, b) : bitwise_equal<double>(a, b));
    EXPECT_FALSE(allclose(a, c));
    Generator g0(7);
    const Tensor d = scaled_dot_product_attention(q, k, v, Tensor(), false, std::nullopt, 0.0, false, &g0);
    EXPECT_TRUE(dt == Float32 ? bitwise_equal<float>(d, scaled_dot_product_attention(q, k, v))
                              : bitwise_equal<double>(d, scaled_dot_product_attention(q, k, v)));
    EXPECT_EQ(g0.counter(), 0u);  // p = 0 draws nothing
  }
}

TEST(FlashAttention, SameBitsAtOneAndTwoThreads) {
  ThreadCountGuard guard;
  manual_seed(15);
  const Tensor q = randn({2, 3, 200, 64}), k = randn({2, 3, 200, 64}), v = randn({2, 3, 200, 64});
  const Tensor cot = randn({2, 3, 200, 64});
  std::vector<Result> r;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    r.push_back(run(false, q, k, v, {.causal = true, .dropout_p = 0.1, .seed = 3}, cot));
  }
  EXPECT_TRUE(bitwise_equal<float>(r[0].out, r[1].out));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bitwise_equal<float>(r[0].grads[i], r[1].grads[i])) << i;
}

// A row whose every position is masked out gives 0 and takes no gradient, in the fused kernel
// and in the math form (PyTorch >= 2.5's rule; softmax's formula would give NaN), for bool and
// float masks; the other rows are as ever.
TEST(FlashAttention, FullyMaskedRowsGiveZeroAndNoGradient) {
  manual_seed(5);
  for (DType dt : {Float32, Float64}) {
    const double rtol = dt == Float64 ? 1e-10 : 1e-4, atol = dt == Float64 ? 1e-12 : 1e-5;
    const Tensor q = randn({1, 2, 5, 8}, dt), k = randn({1, 2, 6, 8}, dt), v = randn({1, 2, 6, 8}, dt), cot = randn({1, 2, 5, 8}, dt);
    std::vector<double> m(30, 1.0);
    for (int j = 0; j < 6; ++j) m[2 * 6 + j] = 0;  // row 2 sees nothing
    const Tensor keep = astype(from_vector<double>(m, {5, 6}), Bool);
    const Tensor additive = astype(where(keep, scalar_tensor(0.0), scalar_tensor(-INFINITY)), dt);
    for (const Tensor& mask : {keep, additive}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (mask.dtype() == Bool ? ", bool mask" : ", float mask"));
      const Result f = run(false, q, k, v, {.mask = mask}, cot), ref = run(true, q, k, v, {.mask = mask}, cot);
      EXPECT_EQ(sum(abs(astype(slice(f.out, 2, 2, 3), Float64))).item<double>(), 0.0);
      EXPECT_EQ(sum(abs(astype(slice(ref.out, 2, 2, 3), Float64))).item<double>(), 0.0);
      EXPECT_LE(worst(f.out, ref.out, rtol, atol), 1.0);
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(all(abs(f.grads[i]) < INFINITY).item<bool>()) << i;  // (no NaN either)
        EXPECT_LE(worst(f.grads[i], ref.grads[i], rtol, atol), 1.0) << i;
      }
      EXPECT_EQ(sum(abs(astype(slice(f.grads[0], 2, 2, 3), Float64))).item<double>(), 0.0);
    }
  }
}

// A NaN score makes its row NaN (as softmax's), whichever tile holds it: in the first of a
// row's key tiles, where the running max is still -inf, it must not pass for a masked tile.
TEST(FlashAttention, ANaNScoreMakesItsRowNaNInAnyTile) {
  manual_seed(6);
  for (DType dt : {Float32, Float64})
    for (int64_t at : {5, 70, 129}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + ", key " + std::to_string(at));
      Tensor k = randn({1, 1, 130, 16}, dt);
      k = where(reshape(arange(130), {1, 1, 130, 1}) == at, scalar_tensor(NAN, dt), k);
      const Tensor q = randn({1, 1, 3, 16}, dt), v = randn({1, 1, 130, 16}, dt);
      const Tensor f = scaled_dot_product_attention(q, k, v), ref = detail::scaled_dot_product_attention_math(q, k, v, Tensor(), false, std::nullopt, 0.0, false, nullptr);
      EXPECT_TRUE(all(f != f).item<bool>());
      EXPECT_TRUE(all(ref != ref).item<bool>());
    }
}

// A whole tile of query rows that sees no key (rows 64-127 masked out), in planes that one thread
// runs one after another: no key tile is live for that query tile, so its dQ is never a
// product's (zeros, not what an earlier plane left), while dK and dV are the other rows' alone.
TEST(FlashAttention, AQueryTileThatSeesNoKeyGetsZeroGradient) {
  manual_seed(21);
  for (DType dt : {Float32, Float64}) {
    const double rtol = dt == Float64 ? 1e-10 : 1e-4, atol = dt == Float64 ? 1e-12 : 1e-5;
    const int64_t L = 140, S = 100;
    const Tensor q = randn({3, 2, L, 16}, dt), k = randn({3, 2, S, 16}, dt), v = randn({3, 2, S, 16}, dt), cot = randn({3, 2, L, 16}, dt);
    Tensor keep = logical_or(greater(uniform({L, S}), scalar_tensor(0.3)), reshape(arange(S), {1, S}) == 0);
    keep = logical_and(keep, logical_or(reshape(arange(L), {L, 1}) < 64, reshape(arange(L), {L, 1}) >= 128));
    const Result f = run(false, q, k, v, {.mask = keep}, cot);
    // the reference: the math form over the rows that see something
    const auto seen = [](const Tensor& x, int64_t axis) { return concatenate({slice(x, axis, 0, 64), slice(x, axis, 128, 140)}, axis); };
    const Result m = run(true, seen(q, 2), k, v, {.mask = seen(keep, 0)}, seen(cot, 2));
    const Tensor unseen = slice(f.out, 2, 64, 128);
    EXPECT_TRUE(all(unseen == 0).item<bool>()) << dtype_name(dt) << ": rows that see no key are 0";
    EXPECT_EQ(sum(abs(slice(f.grads[0], 2, 64, 128))).item<double>(), 0.0) << dtype_name(dt);
    EXPECT_LE(worst(seen(f.grads[0], 2), m.grads[0], rtol, atol), 1.0) << dtype_name(dt) << ": dq";
    EXPECT_LE(worst(f.grads[1], m.grads[1], rtol, atol), 1.0) << dtype_name(dt) << ": dk";
    EXPECT_LE(worst(f.grads[2], m.grads[2], rtol, atol), 1.0) << dtype_name(dt) << ": dv";
  }
}

TEST(FlashAttention, RefusesBadOperandsClearly) {
  std::string m = error_message<ShapeError>([] { scaled_dot_product_attention(zeros({2, 3, 64}), zeros({2, 5, 32}), zeros({2, 5, 64})); });
  EXPECT_TRUE(contains_all(m, {"scaled_dot_product_attention", "embedding size", "(2, 3, 64)", "(2, 5, 32)"}));
  m = error_message<ValueError>([] {
    scaled_dot_product_attention(zeros({1, 6, 3, 8}), zeros({1, 4, 5, 8}), zeros({1, 4, 5, 8}), Tensor(), false, std::nullopt, 0.0, true);
  });
  EXPECT_TRUE(contains_all(m, {"scaled_dot_product_attention", "enable_gqa", "6 heads", "multiple", "4"}));
  m = error_message<ShapeError>([] {
    scaled_dot_product_attention(zeros({1, 6, 3, 8}), zeros({1, 2, 5, 8}), zeros({1, 3, 5, 8}), Tensor(), false, std::nullopt, 0.0, true);
  });
  EXPECT_TRUE(contains_all(m, {"k and v", "heads"}));
  m = error_message<ShapeError>([] {
    scaled_dot_product_attention(zeros({3, 8}), zeros({5, 8}), zeros({5, 8}), Tensor(), false, std::nullopt, 0.0, true);
  });
  EXPECT_TRUE(contains_all(m, {"enable_gqa", "at least 3 axes"}));
  m = error_message<ValueError>([] { scaled_dot_product_attention(zeros({3, 8}), zeros({5, 8}), zeros({5, 8}), Tensor(), false, std::nullopt, 1.0); });
  EXPECT_TRUE(contains_all(m, {"dropout_p", "[0, 1)"}));
  // without enable_gqa, 4 key heads do not broadcast over 6 query heads
  m = error_message<ShapeError>([] { scaled_dot_product_attention(zeros({1, 6, 3, 8}), zeros({1, 4, 5, 8}), zeros({1, 4, 5, 8})); });
  EXPECT_TRUE(contains_all(m, {"batch axes", "do not broadcast"}));
}

TEST(FlashAttention, StepMemoryDoesNotGrowWithLTimesS) {
  // forward + backward of one head at L = S = 1024: the math form holds several (L, S) tensors
  // (scores, weights, their gradients: 4 MiB each in float32); the fused kernel none
  manual_seed(16);
  const int64_t T = 1024, E = 64;
  const Tensor q = randn({1, 1, T, E}), k = randn({1, 1, T, E}), v = randn({1, 1, T, E}), cot = randn({1, 1, T, E});
  const int64_t ls_bytes = T * T * 4;
  auto peak = [&](bool math) {
    std::vector<Tensor> in{q.detach().requires_grad_(true), k.detach().requires_grad_(true), v.detach().requires_grad_(true)};
    const int64_t before = memory_stats().current_bytes;
    reset_peak_memory();
    {
      Tensor o = math ? detail::scaled_dot_product_attention_math(in[0], in[1], in[2], Tensor(), true, std::nullopt, 0, false, nullptr)
                      : scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), true);
      grad(o, in, cot);
    }
    return memory_stats().peak_bytes - before;
  };
  const int64_t fused = peak(false), math = peak(true);
  EXPECT_LT(fused, ls_bytes / 2) << "fused peak " << fused << " bytes";
  EXPECT_GT(math, 2 * ls_bytes) << "math peak " << math << " bytes";
}

// A cached decoder's keys and values are a prefix of each head's preallocated rows: the kernel
// reads those planes where they lie (no packed copy per step) and gives the packed copy's bits.
TEST(FlashAttention, ReadsKeyAndValuePlanesWhereTheyLie) {
  manual_seed(21);
  const int64_t heads = 2, max_len = 100, S = 37, E = 64;
  const Tensor keys = randn({heads, max_len, E}), values = randn({heads, max_len, E});
  const Tensor k = slice(keys, 1, 0, S), v = slice(values, 1, 0, S);  // (heads, S, E), planes max_len * E apart
  ASSERT_FALSE(k.is_contiguous());
  for (const int64_t L : {int64_t{1}, int64_t{5}}) {
    const Tensor q = randn({heads, L, E});
    const bool causal = L > 1;
    const Tensor want = scaled_dot_product_attention(q, k.contiguous(), v.contiguous(), Tensor(), causal);
    const int64_t before = memory_stats().current_bytes;
    reset_peak_memory();
    const Tensor got = scaled_dot_product_attention(q, k, v, Tensor(), causal);
    const int64_t added = memory_stats().peak_bytes - before;
    EXPECT_TRUE(array_equal(got, want)) << "L " << L;
    // the output and the log-sum-exp (and, from 3 rows on, the keys' transposed tiles), never a
    // packed copy of k and v (2 x 18,944 bytes here)
    if (L == 1) EXPECT_LT(added, 2 * S * E * 4) << "added " << added << " bytes";
  }
  // with gradients the planes are packed (the backward reads them so): still the same values
  const Tensor kg = k.detach().requires_grad_(true), q = randn({heads, 3, E});
  EXPECT_TRUE(allclose(scaled_dot_product_attention(q, kg, v, Tensor(), false), scaled_dot_product_attention(q, k.contiguous(), v, Tensor(), false)));
}

// With several heads the output is laid out (B, L, H, E) and returned as its (B, H, L, E) view,
// as PyTorch's fused kernel does: an attention layer's merge of the heads, (B, L, H * E), is then
// a view of the same buffer rather than a copy, so one buffer is kept for the backward of both
// the attention and the output projection. Values and gradients are those of the math form, for
// head sizes the kernel pads (20) and does not (64).
TEST(FlashAttention, ManyHeadsWriteTheHeadsInnermostSoMergingThemIsAView) {
  manual_seed(22);
  for (const int64_t E : {int64_t{20}, int64_t{64}}) {
    const int64_t B = 2, H = 3, L = 33;
    const Tensor q = randn({B, H, L, E}), k = randn({B, H, L, E}), v = randn({B, H, L, E}), cot = randn({B, L, H * E});
    std::vector<Tensor> in{q.detach().requires_grad_(true), k.detach().requires_grad_(true), v.detach().requires_grad_(true)};
    const Tensor o = scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), true);
    EXPECT_FALSE(o.is_contiguous());
    const Tensor merged = reshape(permute(o, {0, 2, 1, 3}), {B, L, H * E});
    EXPECT_EQ(merged.data_ptr(), o.data_ptr()) << "E " << E << ": merging the heads copied";
    const std::vector<Tensor> got = grad(merged, in, cot);

    std::vector<Tensor> ref{q.detach().requires_grad_(true), k.detach().requires_grad_(true), v.detach().requires_grad_(true)};
    const Tensor want_o =
        detail::scaled_dot_product_attention_math(ref[0], ref[1], ref[2], Tensor(), true, std::nullopt, 0, false, nullptr);
    const std::vector<Tensor> want = grad(reshape(permute(want_o, {0, 2, 1, 3}), {B, L, H * E}), ref, cot);
    EXPECT_TRUE(allclose(o, want_o, 1e-5, 1e-5)) << "E " << E;
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(allclose(got[i], want[i], 1e-4, 1e-5)) << "E " << E << " gradient " << i;
  }
}
