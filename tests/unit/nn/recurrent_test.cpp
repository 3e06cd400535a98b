#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/memory.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
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

// Deterministic values shared with the PyTorch script that produced the expected numbers:
// 0.3 * cos(k * arange(n)) reshaped; x = sin(arange).
Tensor pattern(const Shape& s, double k) { return cos(arange(0, double(shape_numel(s)), 1, Float64) * k) * 0.3; }

void set_direction(nn::State& s, int64_t G, int64_t F, int64_t n, int d) {
  NoGrad ng;
  s.param("w_ih").copy_(pattern({F, G * n}, 0.7 + d).reshape({F, G * n}));
  s.param("w_hh").copy_(pattern({n, G * n}, 1.3 + d).reshape({n, G * n}));
  s.param("b_ih").copy_(pattern({G * n}, 0.5 + d));
  s.param("b_hh").copy_(pattern({G * n}, 0.9 + d));
}

}  // namespace

// Expected values: torch.nn.{LSTM,GRU,RNN}(4, 5, batch_first=True, bidirectional=True) in
// float64 with the same weights (transposed to PyTorch's layout), torch 1.13 (Debian).
TEST(Recurrent, BidirectionalMatchesPyTorch) {
  struct Case {
    nn::CellKind kind;
    int64_t gates;
    double sum, y_1_2_7, y_0_0_2;
  };
  const Case cases[] = {
      {nn::CellKind::LSTM, 4, 1.0091684980776863, 0.02282920247958037, 0.019177941898082054},
      {nn::CellKind::GRU, 3, 4.378900431955408, 0.11844546692623967, 0.17731763028164788},
      {nn::CellKind::RNN, 1, 4.332933154961541, -0.37656767158614934, 0.03262462812348427},
  };
  const int64_t B = 2, T = 3, F = 4, n = 5;
  for (const Case& c : cases) {
    nn::Input seq(Shape{-1, T, F}, Float64, "seq");
    nn::RNN rnn(seq, n, {.cell = c.kind, .bidirectional = true});
    set_direction(*rnn.state().children()[0].second, c.gates, F, n, 0);
    set_direction(*rnn.state().children()[1].second, c.gates, F, n, 1);
    seq.set_value(sin(arange(0, double(B * T * F), 1, Float64)).reshape({B, T, F}));
    Tensor y = rnn();
    ASSERT_EQ(y.shape(), (Shape{B, T, 2 * n}));
    EXPECT_NEAR(sum(y).item<double>(), c.sum, 1e-10);
    EXPECT_NEAR(y.at({1, 2, 7}), c.y_1_2_7, 1e-12);
    EXPECT_NEAR(y.at({0, 0, 2}), c.y_0_0_2, 1e-12);
  }
}

TEST(Recurrent, CellUnrolledWithReuseWithSharesWeights) {
  nn::Input x1(3, Float32, "x1"), x2(3, Float32, "x2");
  nn::Input s0(8, Float32, "s0");  // packed [h, c] of a 4-unit LSTM
  nn::LSTMCell c1(x1, s0, 4);
  nn::Layer c2 = c1.reuse_with({x2, c1});
  EXPECT_EQ(c2.shared_state(), c1.shared_state());
  nn::Layer h2 = nn::LSTMCell::hidden(c2);
  EXPECT_EQ(h2.shape(), (Shape{-1, 4}));
  x1.set_value(ones({2, 3}));
  x2.set_value(ones({2, 3}) * 0.5);
  s0.set_value(zeros({2, 8}));
  // the same two steps through an RNN layer over the sequence [x1, x2]
  nn::Input seq(Shape{-1, 2, 3}, Float32, "seq");
  nn::RNN rnn(seq, 4, {.cell = nn::CellKind::LSTM, .return_sequences = false});
  {
    NoGrad ng;
    for (const char* p : {"w_ih", "w_hh", "b_ih", "b_hh"}) rnn.state().param(p).copy_(c1.state().param(p));
  }
  seq.set_value(stack({x1.value(), x2.value()}, 1));
  EXPECT_TRUE(allclose(h2(), rnn(), 1e-5, 1e-6));
  EXPECT_THROW(nn::LSTMCell(x1, x1, 4), ShapeError);
}

TEST(Recurrent, StatefulKeepsStateAndReverseRunsBackwards) {
  nn::Input seq(Shape{-1, 4, 2}, Float32, "seq");
  nn::RNN stateful(seq, 3, {.cell = nn::CellKind::GRU, .return_sequences = false, .stateful = true});
  seq.set_value(uniform({2, 4, 2}));
  Tensor first = stateful();
  Tensor second = stateful();  // starts from the first call's final state
  EXPECT_FALSE(allclose(first, second));
  stateful.reset_state();
  EXPECT_TRUE(allclose(stateful(), first));

  nn::RNN rev(seq, 3, {.cell = nn::CellKind::RNN, .reverse = true});
  nn::Lambda flipped({seq}, [](const std::vector<Tensor>& t) { return flip(t[0], {1}); }, seq.shape());
  nn::RNN fwd(flipped, 3, {.cell = nn::CellKind::RNN});
  {
    NoGrad ng;
    for (const char* p : {"w_ih", "w_hh", "b_ih", "b_hh"}) fwd.state().param(p).copy_(rev.state().param(p));
  }
  // running in reverse equals running forward over the flipped sequence, outputs flipped back
  EXPECT_TRUE(allclose(rev(), flip(fwd(), {1}), 1e-5, 1e-6));
}

TEST(Recurrent, GradientsFlowToAllWeights) {
  nn::Input seq(Shape{-1, 3, 2}, Float32, "seq");
  nn::RNN rnn(seq, 4, {.cell = nn::CellKind::LSTM});
  seq.set_value(uniform({2, 3, 2}));
  sum(square(rnn())).backward();
  for (Tensor p : rnn.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_GT(sum(abs(p.grad())).item<double>(), 0.0);
  }
}

// The layer's steps come from unbind(): its gradients are those of the per-step slices the
// layer took before (values equal; the same ops in the same order otherwise).
TEST(Recurrent, LstmGradientsAreThoseOfPerStepSlices) {
  const int64_t B = 3, T = 17, F = 5, n = 4;
  nn::Input seq(Shape{-1, T, F}, Float64, "seq");
  nn::RNN rnn(seq, n, {.cell = nn::CellKind::LSTM});
  nn::State& s = rnn.state();
  set_direction(s, 4, F, n, 0);
  const Tensor x = sin(arange(0, double(B * T * F), 1, Float64)).reshape({B, T, F});
  const Tensor c = cos(arange(0, double(B * T * n), 1, Float64)).reshape({B, T, n});
  seq.set_value(x);
  Tensor loss = sum(rnn() * c);
  const int64_t before = memory_stats().allocations;
  loss.backward();
  const int64_t layer_allocations = memory_stats().allocations - before;

  const std::vector<Tensor> params{s.param("w_ih"), s.param("w_hh"), s.param("b_ih"), s.param("b_hh")};
  Tensor xw = matmul(x, params[0]) + (params[2] + params[3]);
  Tensor st = zeros({B, 2 * n}, Float64);
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < T; ++t) {
    Tensor h = slice(st, -1, 0, n), cs = slice(st, -1, n, 2 * n);
    st = lstm_cell(squeeze(slice(xw, 1, t, t + 1), {1}) + matmul(h, params[1]), cs);
    outs.push_back(slice(st, -1, 0, n));
  }
  Tensor sliced_loss = sum(stack(outs, 1) * c);
  const int64_t sliced_before = memory_stats().allocations;
  const std::vector<Tensor> expected = grad(sliced_loss, params);
  const int64_t sliced_allocations = memory_stats().allocations - sliced_before;
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(array_equal(params[i].grad(), expected[i])) << i;
  // the slices' backward makes a zero tensor of the whole sequence's shape per step
  EXPECT_LE(layer_allocations + T - 1, sliced_allocations) << layer_allocations << " vs " << sliced_allocations;
}
