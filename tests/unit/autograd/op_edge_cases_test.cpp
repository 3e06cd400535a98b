// Edge cases found by differential testing against NumPy / PyTorch where the reference is not
// PyTorch 1.13 itself (it is wrong there, or the question is an error or a crash). The cases
// PyTorch answers well are in tests/reference/op_cases.cpp.
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/half.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/attention.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/linalg.h>
#include <loom/ops/losses.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/normalization.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "unit/common/core_test_util.h"
#include "unit/ops/ops_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// ---------------------------------------------------------------- reductions over empty axes
TEST(EmptyReductions, NoIdentityStillRaisesAsNumPy) {
  // numpy.max / argmax of an empty axis raise; the reductions with an identity (or log(0))
  // answer (tests/reference: sum 0, prod 1, mean/var/std NaN, logsumexp -inf, softmax empty)
  std::string m = error_message<ValueError>([] { argmax(zeros({0, 3}), 0); });
  EXPECT_TRUE(contains_all(m, {"argmax", "(0, 3)", "size zero"}));
  m = error_message<ValueError>([] { argmin(zeros({0})); });
  EXPECT_TRUE(contains_all(m, {"argmin", "size zero"}));
  m = error_message<ValueError>([] { min(zeros({2, 0}), {1}); });
  EXPECT_TRUE(contains_all(m, {"min", "(2, 0)", "size zero"}));
  EXPECT_EQ(max(zeros({0, 3}), {1}).shape(), (Shape{0}));  // the empty axis is not reduced
}

TEST(EmptyReductions, SoftmaxFamilyOverAnEmptyAxis) {
  Tensor x = zeros({3, 0});
  x.requires_grad_();
  Tensor y = softmax(x, 1);
  EXPECT_EQ(y.shape(), (Shape{3, 0}));
  backward(sum(y));
  EXPECT_EQ(x.grad().shape(), (Shape{3, 0}));
  EXPECT_EQ(log_softmax(zeros({0}, Float64), 0).shape(), (Shape{0}));
  Tensor l = logsumexp(zeros({0, 3}), {0});
  EXPECT_EQ(l.shape(), (Shape{3}));
  for (float v : l.to_vector<float>()) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
}

TEST(SoftmaxZeroD, AxisZeroOrMinusOneOnly) {
  EXPECT_EQ(softmax(scalar_tensor(3.0)).item<float>(), 1.0f);
  EXPECT_EQ(log_softmax(scalar_tensor(3.0), 0).item<float>(), 0.0f);
  std::string m = error_message<IndexError>([] { softmax(scalar_tensor(3.0), 1); });
  EXPECT_TRUE(contains_all(m, {"softmax", "axis 1", "0-d", "0 or -1"}));
}

// ---------------------------------------------------------------- integer arithmetic
TEST(IntegerDivision, LowestByMinusOneWrapsAndByZeroIsZero) {
  // x86's idiv traps (SIGFPE) on lowest / -1; NumPy wraps the quotient and gives 0 remainders
  const int64_t lo = std::numeric_limits<int64_t>::min();
  Tensor a = tensor<int64_t>({lo, lo, 7, -7}), b = tensor<int64_t>({-1, 0, 0, -1});
  EXPECT_EQ(floor_divide(a, b).to_vector<int64_t>(), (std::vector<int64_t>{lo, 0, 0, 7}));
  EXPECT_EQ(mod(a, b).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
  const int32_t lo32 = std::numeric_limits<int32_t>::min();
  Tensor a32 = tensor<int32_t>({lo32, lo32}), b32 = tensor<int32_t>({-1, -1});
  EXPECT_EQ(floor_divide(a32, b32).to_vector<int32_t>(), (std::vector<int32_t>{lo32, lo32}));
  EXPECT_EQ(mod(a32, b32).to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
  // a broadcast -1 (the scalar loop) and a strided divisor (the strided loop)
  EXPECT_EQ(floor_divide(a, tensor<int64_t>({-1})).to_vector<int64_t>(), (std::vector<int64_t>{lo, lo, -7, 7}));
  Tensor strided = tensor<int64_t>({-1, 9, -1, 9, -1, 9, -1, 9}).index({Slice(None, None, 2)});
  EXPECT_EQ(mod(a, strided).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(IntegerOverflow, WrapsModuloTwoToTheBitsAsNumPy) {
  // Signed overflow is undefined behaviour in C++; the kernels compute unsigned, so the
  // result is NumPy's wrapped one on every compiler (and UBSan stays quiet: scripts/sanitize.sh)
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Tensor a = tensor<int64_t>({hi, lo, lo, 3});
  EXPECT_EQ((a + tensor<int64_t>({1, -1, lo, 4})).to_vector<int64_t>(), (std::vector<int64_t>{lo, hi, 0, 7}));
  EXPECT_EQ((a - tensor<int64_t>({-1, 1, 0, 4})).to_vector<int64_t>(), (std::vector<int64_t>{lo, hi, lo, -1}));
  EXPECT_EQ((a * tensor<int64_t>({2, -1, 2, 4})).to_vector<int64_t>(), (std::vector<int64_t>{-2, lo, 0, 12}));
  EXPECT_EQ(negative(a).to_vector<int64_t>(), (std::vector<int64_t>{-hi, lo, lo, -3}));
  EXPECT_EQ(abs(a).to_vector<int64_t>(), (std::vector<int64_t>{hi, lo, lo, 3}));
  EXPECT_EQ(square(tensor<int64_t>({hi})).to_vector<int64_t>(), (std::vector<int64_t>{1}));
  const int32_t lo32 = std::numeric_limits<int32_t>::min(), hi32 = std::numeric_limits<int32_t>::max();
  Tensor b = tensor<int32_t>({hi32, lo32});
  EXPECT_EQ((b + tensor<int32_t>({1, -1})).to_vector<int32_t>(), (std::vector<int32_t>{lo32, hi32}));
  EXPECT_EQ((b * tensor<int32_t>({hi32, hi32})).to_vector<int32_t>(), (std::vector<int32_t>{1, lo32}));
  EXPECT_EQ(negative(b).to_vector<int32_t>(), (std::vector<int32_t>{-hi32, lo32}));
  // reductions and scans accumulate in int64, which wraps the same way
  EXPECT_EQ(sum(tensor<int64_t>({hi, hi, 2})).item<int64_t>(), 0);
  EXPECT_EQ(prod(tensor<int64_t>({int64_t{1} << 32, int64_t{1} << 32, 5})).item<int64_t>(), 0);
  EXPECT_EQ(cumsum(tensor<int64_t>({hi, 1, 1}), 0).to_vector<int64_t>(), (std::vector<int64_t>{hi, lo, lo + 1}));
  EXPECT_EQ(matmul(tensor<int64_t>({hi, hi}).reshape({1, 2}), tensor<int64_t>({1, 1}).reshape({2, 1})).item<int64_t>(), -2);
}

TEST(Attention, EmptySequencesAndEmbeddings) {
  // E = 0: every score is 0, so each query attends uniformly (PyTorch: the mean of v over S)
  Tensor q = randn({2, 3, 0}), k = randn({2, 4, 0}), v = randn({2, 4, 5}).requires_grad_();
  Tensor o = scaled_dot_product_attention(q, k, v);
  EXPECT_TRUE(allclose(o, broadcast_to(mean(v, {1}, true), {2, 3, 5}))) << o;
  sum(o).backward();
  EXPECT_TRUE(allclose(v.grad(), full({2, 4, 5}, 3.0 / 4.0)));
  // L = 0 or S = 0: an empty result, or zeros (an empty weighted sum)
  EXPECT_EQ(scaled_dot_product_attention(randn({2, 0, 4}), randn({2, 4, 4}), randn({2, 4, 5})).shape(), (Shape{2, 0, 5}));
  Tensor z = scaled_dot_product_attention(randn({2, 3, 4}), randn({2, 0, 4}), randn({2, 0, 5}));
  EXPECT_EQ(z.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(sum(abs(z)).item<double>(), 0.0);
}

TEST(IntegerPower, NegativeExponentsRaiseAsNumPy) {
  std::string m = error_message<ValueError>([] { power(tensor<int32_t>({2, 3}), tensor<int32_t>({-1, 2})); });
  EXPECT_TRUE(contains_all(m, {"power", "negative integer powers", "-1", "int32"}));
  m = error_message<ValueError>([] { power(tensor<int64_t>({1}), -2); });  // even 1 ** -2 (NumPy)
  EXPECT_TRUE(contains_all(m, {"power", "negative integer powers", "-2"}));
  EXPECT_EQ(power(tensor<int32_t>({2, -3, 5}), tensor<int32_t>({10, 3, 0})).to_vector<int32_t>(),
            (std::vector<int32_t>{1024, -27, 1}));
  // a floating operand makes it true power
  EXPECT_EQ(power(tensor<int32_t>({2}), -1.0).item<float>(), 0.5f);
}

// ---------------------------------------------------------------- clip
TEST(Clip, LowerAboveUpperGivesUpper) {
  Tensor x = tensor<float>({-1.0f, 0.0f, 2.0f});
  x.requires_grad_();
  Tensor y = clip(x, 1.0, 0.5);  // min(max(x, 1), 0.5), as NumPy and PyTorch
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.5f, 0.5f, 0.5f}));
  backward(sum(y));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

// ---------------------------------------------------------------- 0-d boolean index
TEST(BoolScalarIndex, AddsAnAxisOfOneOrZero) {
  Tensor x = loom_test::iota({2, 3});
  EXPECT_EQ(x.index({true}).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.index({false}).shape(), (Shape{0, 2, 3}));
  EXPECT_EQ(x.index({Slice(), true, 1}).to_vector<float>(), (std::vector<float>{1, 4}));
  EXPECT_EQ(x.index({scalar_tensor(true), Ellipsis}).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.index({1, false}).shape(), (Shape{0, 3}));
  // gradients flow through the inserted axis
  Tensor w = x.detach().requires_grad_(true);
  backward(sum(w.index({true, Slice(), 2})));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 0, 1, 0, 0, 1}));
  // x[True] = v writes all of x
  EXPECT_EQ(index_put(x, {true}, scalar_tensor(7.0)).to_vector<float>(), std::vector<float>(6, 7.0f));
  EXPECT_EQ(index_put(x, {false}, scalar_tensor(7.0)).to_vector<float>(), x.to_vector<float>());
}

// ---------------------------------------------------------------- max pooling
TEST(MaxPoolPadding, WindowsEntirelyInThePaddingPassNoGradient) {
  // H = 1, kernel 2, padding 1, dilation 2: the only window reads rows -1 and 1, both padding.
  // PyTorch 1.13 reports index 2 (outside the 1x2 plane) and adds the gradient to the next
  // channel's plane; Loom reports -1 and passes none.
  for (DType dt : {Float32, Float64}) {  // the vector kernel and the loops
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = tensor<float>({1, 2, 3, 4}).reshape({1, 2, 1, 2}).astype(dt);
    x.requires_grad_();
    auto [y, idx] = max_pool2d_with_indices(x, 2, IntList{}, IntList{1, 0}, IntList{2, 1});
    EXPECT_EQ(y.shape(), (Shape{1, 2, 1, 1}));
    for (double v : y.to_vector<double>()) EXPECT_EQ(v, -kInf);
    EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{-1, -1}));
    backward(sum(y));
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 0}));
    // the values-only path with int32 indices for the gradient; columns in the padding too
    Tensor xt = x.detach().reshape({1, 2, 2, 1}).requires_grad_(true);
    Tensor yt = max_pool2d(xt, {1, 2}, IntList{}, IntList{0, 1}, IntList{1, 2});
    EXPECT_EQ(yt.shape(), (Shape{1, 2, 2, 1}));
    backward(sum(yt));
    EXPECT_EQ(xt.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 0}));
  }
}

// ---------------------------------------------------------------- binary_cross_entropy_with_logits
TEST(BceWithLogits, WeightsBroadcastToTheLogitsOnlyAsPyTorch) {
  // PyTorch multiplies the loss by weight in place (and pos_weight's term into a
  // target-shaped tensor), so both must broadcast to the logits' shape; a larger one is an
  // error there ("output with shape [3] doesn't match the broadcast shape [2, 3]") and here.
  Tensor x = zeros({2, 3}), t = zeros({2, 3});
  EXPECT_EQ(binary_cross_entropy_with_logits(x, t, ones({3}), ones({2, 1}), Reduction::None).shape(), (Shape{2, 3}));
  std::string m = error_message<ShapeError>(
      [] { binary_cross_entropy_with_logits(zeros({3}), zeros({3}), ones({2, 3}), Tensor(), Reduction::None); });
  EXPECT_TRUE(contains_all(m, {"binary_cross_entropy_with_logits", "weight", "(2, 3)", "(3,)"}));
  m = error_message<ShapeError>(
      [] { binary_cross_entropy_with_logits(zeros({2, 1}), zeros({2, 1}), Tensor(), ones({3}), Reduction::Mean); });
  EXPECT_TRUE(contains_all(m, {"binary_cross_entropy_with_logits", "pos_weight", "(3,)", "(2, 1)"}));
}

// ---------------------------------------------------------------- float16 / bfloat16 round trips
namespace {
// Every 16-bit pattern as a tensor of `dt`, through float32 and back, compared bit for bit.
void expect_every_pattern_round_trips(DType dt) {
  Tensor h = empty({65536}, dt);
  auto* p = static_cast<uint16_t*>(h.data_ptr());
  for (uint32_t b = 0; b < 0x10000; ++b) p[b] = static_cast<uint16_t>(b);
  Tensor back = h.astype(Float32).astype(dt);
  const auto* q = static_cast<const uint16_t*>(back.data_ptr());
  int wrong = 0;
  for (uint32_t b = 0; b < 0x10000; ++b)
    if (q[b] != b && ++wrong <= 5) ADD_FAILURE() << dtype_name(dt) << " pattern 0x" << std::hex << b << " came back as 0x" << q[b];
  EXPECT_EQ(wrong, 0);
}
}  // namespace

TEST(HalfRoundTrip, EveryFloat16PatternIncludingNaNs) { expect_every_pattern_round_trips(Float16); }
TEST(HalfRoundTrip, EveryBFloat16PatternIncludingSignallingNaNs) { expect_every_pattern_round_trips(BFloat16); }

TEST(HalfRoundTrip, NaNWithPayloadOnlyInDroppedBitsStaysNaN) {
  // float32 NaNs whose payload lies wholly in the bits a 16-bit type drops must not become inf
  for (uint32_t u : {0x7f800001u, 0xff800001u, 0x7f801fffu, 0x7f80ffffu}) {
    float f;
    std::memcpy(&f, &u, 4);
    EXPECT_TRUE(std::isnan(static_cast<float>(half(f)))) << std::hex << u;
    EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(f)))) << std::hex << u;
    EXPECT_EQ(half(f).bits & 0x8000u, (u >> 16) & 0x8000u);  // the sign is kept
  }
}

// ---------------------------------------------------------------- layer_norm over one value
// Found by random differential testing: over a single normalized value the output is the bias
// whatever x, so d y / d x is exactly 0. PyTorch 1.13 answers rounding noise scaled by
// rstd^3 = eps^-1.5 (-1.2e-4 on the case found), Loom's formula gave -4.3e-6; Loom now gives 0
// in both dtypes, fused or not, for contiguous and strided inputs, with and without an affine.
TEST(LayerNormOneValue, InputGradientIsExactlyZero) {
  Generator gen(11);
  for (DType dt : {Float32, Float64})
    for (bool strided : {false, true})
      for (bool affine : {false, true}) {
        Tensor base = uniform({4, strided ? 2 : 1}, -3, 3, dt, Device::cpu(), &gen);
        Tensor x = (strided ? base.index({Slice(), Slice(1, 2)}) : base).detach().requires_grad_();
        Tensor w = affine ? uniform({1}, 0.5, 2, dt, Device::cpu(), &gen).requires_grad_() : Tensor();
        Tensor b = affine ? uniform({1}, -1, 1, dt, Device::cpu(), &gen).requires_grad_() : Tensor();
        Tensor y = layer_norm(x, {1}, w, b, 1e-5);
        Tensor g = uniform({4, 1}, -1, 1, dt, Device::cpu(), &gen);
        y.backward(g);
        const std::string what = std::string(dtype_name(dt)) + (strided ? " strided" : "") + (affine ? " affine" : "");
        for (double v : astype(x.grad(), Float64).to_vector<double>()) EXPECT_EQ(v, 0.0) << what;
        EXPECT_TRUE(array_equal(y.detach(), affine ? broadcast_to(b.detach(), {4, 1}) : zeros({4, 1}, dt))) << what;
        if (affine) {
          EXPECT_EQ(astype(w.grad(), Float64).item<double>(), 0.0) << what;                 // x - mean = 0
          EXPECT_NEAR(astype(b.grad(), Float64).item<double>(), astype(sum(g), Float64).item<double>(), 1e-6) << what;
        }
      }
}
