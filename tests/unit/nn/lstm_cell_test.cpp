// The fused LSTM cell (loom::lstm_cell) against the composition of elementwise ops it replaces,
// and the LSTM layer built on it against an unrolled composition with per-step biases.
// PyTorch references and finite differences: the lstm_cell cases of tests/reference/op_cases.cpp.
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/recurrent.h>
#include <loom/nn/state.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/recurrent.h>
#include <loom/ops/reduction.h>

#include <cmath>

using namespace loom;

namespace {

// The definition: c2 = sigmoid(f) c + sigmoid(i) tanh(g), h2 = sigmoid(o) tanh(c2).
Tensor composed(const Tensor& gates, const Tensor& c) {
  const int64_t n = c.dim(1);
  Tensor i = sigmoid(slice(gates, -1, 0, n)), f = sigmoid(slice(gates, -1, n, 2 * n));
  Tensor g = loom::tanh(slice(gates, -1, 2 * n, 3 * n)), o = sigmoid(slice(gates, -1, 3 * n, 4 * n));
  Tensor c2 = f * c + i * g;
  return concatenate({o * loom::tanh(c2), c2}, -1);
}

double rtol(DType d) { return d == Float32 ? 2e-6 : 1e-14; }

// Values and the gradients of gates and c for one cotangent, fused vs composed.
void expect_matches_composition(const Tensor& gates, const Tensor& c) {
  SCOPED_TRACE("gates " + shape_str(gates.shape()) + " " + dtype_name(gates.dtype()));
  const double tol = rtol(gates.dtype());
  Tensor fused = lstm_cell(gates, c), ref = composed(gates, c);
  ASSERT_EQ(fused.shape(), (Shape{c.dim(0), 2 * c.dim(1)}));
  ASSERT_EQ(fused.dtype(), gates.dtype());
  EXPECT_TRUE(allclose(fused, ref, tol, tol)) << "max |diff| " << max(abs(fused - ref)).item<double>();
  Generator gen(7);
  Tensor cot = randn(fused.shape(), fused.dtype(), Device(), &gen);
  std::vector<Tensor> gf = grad(fused, {gates, c}, cot), gr = grad(ref, {gates, c}, cot);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(gf[k].shape(), gr[k].shape());
    EXPECT_TRUE(allclose(gf[k], gr[k], 4 * tol, 4 * tol)) << "gradient " << k << " max |diff| " << max(abs(gf[k] - gr[k])).item<double>();
  }
}

Tensor leaf(const Shape& s, DType d, uint64_t seed, double scale) {
  Generator gen(seed);
  NoGrad ng;
  return (randn(s, d, Device(), &gen) * scale).astype(d).requires_grad_();
}

}  // namespace

TEST(LstmCell, MatchesTheCompositionInValuesAndGradients) {
  // batch 1 and one unit, odd widths (vector tails), a batch larger than one task
  const std::pair<int64_t, int64_t> sizes[] = {{1, 1}, {3, 5}, {7, 37}, {2, 200}, {65, 3}};
  for (DType d : {Float32, Float64})
    for (auto [B, n] : sizes) expect_matches_composition(leaf({B, 4 * n}, d, 1, 2.0), leaf({B, n}, d, 2, 1.0));
}

TEST(LstmCell, SaturatedGatesStayFinite) {
  for (DType d : {Float32, Float64}) {
    Tensor gates = leaf({4, 24}, d, 3, 40.0), c = leaf({4, 6}, d, 4, 1.0);
    expect_matches_composition(gates, c);
    EXPECT_TRUE(std::isfinite(sum(abs(lstm_cell(gates, c))).item<double>()));
  }
}

TEST(LstmCell, NonContiguousInputsAsTheLayerPassesThem) {
  for (DType d : {Float32, Float64}) {
    // c as the second half of a packed [h, c] state, gates through a transposed base
    Tensor state = leaf({3, 10}, d, 5, 1.0), base = leaf({20, 3}, d, 6, 2.0);
    Tensor c = slice(state, -1, 5, 10), gates = transpose(base);
    ASSERT_FALSE(c.is_contiguous());
    ASSERT_FALSE(gates.is_contiguous());
    expect_matches_composition(gates, c);
    Tensor fused = lstm_cell(gates, c);
    std::vector<Tensor> g = grad(sum(fused * fused), {state, base});
    std::vector<Tensor> r = grad(sum(composed(gates, c) * composed(gates, c)), {state, base});
    EXPECT_TRUE(allclose(g[0], r[0], 4 * rtol(d), 4 * rtol(d)));
    EXPECT_TRUE(allclose(g[1], r[1], 4 * rtol(d), 4 * rtol(d)));
    // the h half of the state gets no gradient through c
    EXPECT_EQ(max(abs(slice(g[0], -1, 0, 5))).item<double>(), 0.0);
  }
}

TEST(LstmCell, EmptyBatchAndNoGrad) {
  Tensor e = lstm_cell(zeros({0, 8}), zeros({0, 2}));
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  Tensor gates = leaf({0, 8}, Float32, 1, 1.0), c = leaf({0, 2}, Float32, 2, 1.0);
  std::vector<Tensor> g = grad(sum(lstm_cell(gates, c)), {gates, c});
  EXPECT_EQ(g[0].shape(), (Shape{0, 8}));
  EXPECT_EQ(g[1].shape(), (Shape{0, 2}));
  {
    NoGrad ng;
    Tensor y = lstm_cell(leaf({2, 8}, Float32, 1, 1.0), leaf({2, 2}, Float32, 2, 1.0));
    EXPECT_FALSE(y.requires_grad());
  }
  // only c requires grad: gates get none, c gets the composition's
  Tensor g2 = leaf({2, 8}, Float64, 3, 1.0).detach(), c2 = leaf({2, 2}, Float64, 4, 1.0);
  EXPECT_TRUE(allclose(grad(sum(lstm_cell(g2, c2)), {c2})[0], grad(sum(composed(g2, c2)), {c2})[0], 1e-14, 1e-14));
}

TEST(LstmCell, HalfFloatsRunTheComposition) {
  Tensor gates = leaf({2, 12}, Float32, 8, 1.0).detach(), c = leaf({2, 3}, Float32, 9, 1.0).detach();
  Tensor h = lstm_cell(gates.astype(Float16), c.astype(Float16));
  EXPECT_EQ(h.dtype(), Float16);
  EXPECT_TRUE(allclose(h.astype(Float32), lstm_cell(gates, c), 1e-2, 1e-2));
}

TEST(LstmCell, BadArgumentsNameWhatIsWrong) {
  EXPECT_THROW(lstm_cell(zeros({2, 8}), zeros({2, 3})), ShapeError);   // 8 != 4 * 3
  EXPECT_THROW(lstm_cell(zeros({3, 8}), zeros({2, 2})), ShapeError);   // batch
  EXPECT_THROW(lstm_cell(zeros({8}), zeros({2, 2})), ShapeError);      // rank
  EXPECT_THROW(lstm_cell(zeros({2, 8}, Int32), zeros({2, 2}, Int32)), DTypeError);
  EXPECT_THROW(lstm_cell(zeros({2, 8}), zeros({2, 2}, Float64)), DTypeError);
  EXPECT_THROW(lstm_cell(Tensor(), zeros({2, 2})), ValueError);
  try {
    lstm_cell(zeros({2, 8}), zeros({2, 3}));
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 12)"), std::string::npos) << e.what();
  }
}

// The layer: fused cell, both biases folded into the input projection once per sequence.
// Reference: the unrolled composition with b_hh added every step, as before the fusion.
TEST(LstmCell, RNNLayerMatchesTheUnrolledComposition) {
  for (DType d : {Float32, Float64}) {
    const int64_t B = 3, T = 4, F = 5, n = 6;
    nn::Input seq(Shape{-1, T, F}, d, "seq");
    nn::RNN rnn(seq, n, {.cell = nn::CellKind::LSTM});
    {
      NoGrad ng;
      Generator gen(11);
      for (const char* p : {"b_ih", "b_hh"}) rnn.state().param(p).copy_(randn({4 * n}, d, Device(), &gen) * 0.5);
    }
    Generator gen(12);
    Tensor x = randn({B, T, F}, d, Device(), &gen);
    seq.set_value(x);
    Tensor y = rnn();
    const nn::State& s = rnn.state();
    std::vector<Tensor> params{s.param("w_ih"), s.param("w_hh"), s.param("b_ih"), s.param("b_hh")};
    Tensor st = zeros({B, 2 * n}, d);
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < T; ++t) {
      Tensor xt = squeeze(slice(x, 1, t, t + 1), {1});
      Tensor gates = matmul(xt, params[0]) + params[2] + matmul(slice(st, -1, 0, n), params[1]) + params[3];
      st = composed(gates, slice(st, -1, n, 2 * n));
      outs.push_back(slice(st, -1, 0, n));
    }
    Tensor ref = stack(outs, 1);
    const double tol = d == Float32 ? 1e-5 : 1e-13;
    EXPECT_TRUE(allclose(y, ref, tol, tol)) << "max |diff| " << max(abs(y - ref)).item<double>();
    Tensor cot = randn(y.shape(), d, Device(), &gen);
    std::vector<Tensor> gy = grad(y, params, cot), gr = grad(ref, params, cot);
    for (size_t k = 0; k < params.size(); ++k)
      EXPECT_TRUE(allclose(gy[k], gr[k], tol, tol)) << "param " << k << " max |diff| " << max(abs(gy[k] - gr[k])).item<double>();
  }
}
