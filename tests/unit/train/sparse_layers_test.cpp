// SparseInput (a bag-of-words model with sparse rows into Linear) and DropConnect
// (nn/sparse.h, docs/sparse.md).
#include <gtest/gtest.h>

#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/nn/activation.h>
#include <loom/nn/init.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/mode.h>
#include <loom/nn/sparse.h>
#include <loom/nn/state.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/losses.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/ops/sparse.h>
#include <loom/train/optimizers.h>

#include <cmath>
#include <vector>

using namespace loom;

namespace {

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item<double>(); }

// A tiny synthetic corpus: documents of class 0 use words 0..9, class 1 words 10..19 (vocabulary
// 24: words 20..23 are noise in both). Rows are word counts.
struct Corpus {
  SparseTensor counts;  // (docs, 24)
  Tensor dense;         // the same counts, dense
  Tensor labels;        // (docs,) int64
};

Corpus corpus(int64_t docs, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> rows, cols, labels;
  std::vector<float> vals;
  const std::vector<int64_t> words = randint(0, 10, {docs, 5}, Int64, default_device(), &g).to_vector<int64_t>();
  const std::vector<int64_t> noise = randint(20, 24, {docs}, Int64, default_device(), &g).to_vector<int64_t>();
  for (int64_t d = 0; d < docs; ++d) {
    const int64_t label = d % 2;
    labels.push_back(label);
    for (int64_t w = 0; w < 5; ++w) {  // repeated words stay duplicates: they add up to counts
      rows.push_back(d);
      cols.push_back(words[d * 5 + w] + 10 * label);
      vals.push_back(1.0f);
    }
    rows.push_back(d);
    cols.push_back(noise[d]);
    vals.push_back(1.0f);
  }
  const int64_t nnz = static_cast<int64_t>(vals.size());
  rows.insert(rows.end(), cols.begin(), cols.end());
  Corpus c;
  c.counts = SparseTensor::coo(from_vector<int64_t>(rows, {2, nnz}), from_vector<float>(vals, {nnz}), {docs, 24});
  c.dense = c.counts.to_dense();
  c.labels = from_vector<int64_t>(labels, {docs});
  return c;
}

}  // namespace

TEST(SparseInput, LinearOverSparseEqualsDenseWithGradients) {
  manual_seed(5);
  Corpus c = corpus(12, 1);
  nn::SparseInput xs(24, Float32, "words");
  nn::Linear hidden(xs, 8, {.bias_init = nn::Init::uniform(-0.5, 0.5)}, "hidden");
  nn::Linear out(nn::Activation(hidden, nn::relu), 2, {}, "out");
  // the dense model shares the sparse model's parameters
  nn::Input xd(24, Float32, "dense_words");
  nn::Layer hidden_d = hidden.reuse_with(xd);
  nn::Layer out_d = out.reuse_with(nn::Activation(hidden_d, nn::relu));
  xs.set_value(c.counts);
  xd.set_value(c.dense);

  auto grads = [&](const nn::Layer& y) {
    Tensor loss = cross_entropy(y(), c.labels);
    std::vector<Tensor> ps = out.parameters(), hs = hidden.parameters();
    ps.insert(ps.end(), hs.begin(), hs.end());
    std::vector<Tensor> gs = loom::grad(loss, ps);
    gs.push_back(loss);
    return gs;
  };
  const std::vector<Tensor> gs = grads(out), gd = grads(out_d);
  ASSERT_EQ(gs.size(), gd.size());
  EXPECT_LT(max_abs_diff(out(), out_d()), 1e-6);
  for (size_t i = 0; i < gs.size(); ++i) EXPECT_LT(max_abs_diff(gs[i], gd[i]), 1e-6) << "gradient " << i;
  // the hidden weights' gradient is not zero: the sparse product passes it on
  EXPECT_GT(max(abs(gs[2])).item<double>(), 0.0);

  // the compiled plan reads the SparseInput's value too (it is not a positional input)
  Graph g = Graph::build({out});
  EXPECT_TRUE(same(g.compile().run({})[0], out()));
}

TEST(SparseInput, BagOfWordsClassifierLearns) {
  manual_seed(7);
  Corpus c = corpus(40, 2);
  nn::SparseInput x(24, Float32, "words");
  nn::Linear hidden(x, 8, {}, "hidden");
  nn::Linear logits(nn::Activation(hidden, nn::relu), 2, {}, "logits");
  x.set_value(c.counts);
  train::Adam opt(Graph::build({logits}).parameters(), {.lr = 0.05});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(logits(), c.labels);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.1 * first) << "first " << first << ", last " << last;
  // held-out documents are classified
  Corpus test = corpus(20, 3);
  x.set_value(test.counts);
  EXPECT_TRUE(same(argmax(logits(), -1), test.labels));
}

TEST(SparseInput, BadValuesAndReaders) {
  nn::SparseInput x(4, Float32, "bow");
  auto msg = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no exception)";
  };
  const std::string none = msg([&] { nn::Linear(x, 2)(); });
  EXPECT_NE(none.find("SparseInput 'bow'"), std::string::npos) << none;
  EXPECT_NE(none.find("no value"), std::string::npos) << none;
  EXPECT_THROW(x.set_value(SparseTensor::from_dense(zeros({2, 5}))), ShapeError);
  EXPECT_THROW(x.set_value(SparseTensor::from_dense(zeros({2, 4}, Float64))), DTypeError);
  EXPECT_THROW(x.set_value(SparseTensor()), ShapeError);
  EXPECT_THROW(nn::SparseInput(0), ValueError);
  EXPECT_THROW(nn::SparseInput(3, Int64), DTypeError);
  x.set_value(SparseTensor::from_dense(eye(4)));
  EXPECT_TRUE(x.has_value());
  // a layer that takes dense tensors cannot read it: an error, not a wrong result
  EXPECT_THROW(nn::Activation(x, nn::relu)(), Error);
  x.clear();
  EXPECT_FALSE(x.has_value());
  EXPECT_THROW(nn::SparseInput(nn::Linear(x, 2).impl()), ValueError);  // not a SparseInput
}

TEST(DropConnect, MaskStatisticsAndScaling) {
  manual_seed(1);
  nn::Input x(100, Float64, "x");
  nn::DropConnect dc(x, 100, 0.3, {.bias = false, .weight_init = nn::Init::uniform(1, 2), .seed = 9}, "dc");
  const Tensor w = dc.state().param("weights");
  x.set_value(eye(100, std::nullopt, 0, Float64));  // y = the effective weights
  Tensor y;
  {
    nn::ModeScope train(nn::Mode::Train);
    y = dc();
  }
  const double dropped = mean((y == 0.0).astype(Float64)).item<double>();
  EXPECT_NEAR(dropped, 0.3, 0.02);  // 10000 weights: the standard deviation is 0.0046
  // kept weights are scaled by 1 / (1 - p)
  Tensor kept = y != 0.0;
  EXPECT_LT(max(abs(where(kept, y - w / 0.7, zeros({}, Float64)))).item<double>(), 1e-12);
  // Eval: the weights themselves
  EXPECT_TRUE(same(dc(), w));
}

TEST(DropConnect, EvalEqualsLinearWithTheSameWeights) {
  manual_seed(2);
  nn::Input x(5, Float32, "x");
  nn::DropConnect dc(x, 3, 0.5, {.bias = false}, "dc");
  nn::Linear lin(x, 3, {.bias = false, .shared_weights = dc.state().param("weights")}, "lin");
  x.set_value(randn({4, 5}));
  EXPECT_TRUE(same(dc(), lin()));
  nn::ModeScope train(nn::Mode::Train);
  EXPECT_FALSE(same(dc(), lin()));  // half of the weights dropped
}

TEST(DropConnect, GradientsOnlyThroughKeptWeights) {
  manual_seed(3);
  nn::Input x(6, Float64, "x");
  nn::DropConnect dc(x, 4, 0.4, {.weight_init = nn::Init::uniform(1, 2), .seed = 4}, "dc");
  const Tensor w = dc.state().param("weights");
  const Tensor xv = ones({3, 6}, Float64);
  x.set_value(xv);
  nn::ModeScope train(nn::Mode::Train);
  // the same seed and position draw the same mask: read it with x = identity from a twin layer
  nn::Input probe(6, Float64, "probe");
  nn::Layer twin = dc.reuse_with(probe);
  const Tensor rng0 = dc.state().buffer("rng").copy();
  probe.set_value(eye(6, std::nullopt, 0, Float64));
  const Tensor mask = (twin() - dc.state().param("bias")) != 0.0;
  dc.state().buffer("rng").copy_(rng0);  // rewind: the next call draws the same mask
  sum(dc()).backward();
  // d sum(x @ (W * M / 0.6)) / dW = (sum of x's rows) * M / 0.6 = 3 M / 0.6
  const Tensor expected = where(mask, full({}, 3.0 / 0.6, Float64), zeros({}, Float64));
  EXPECT_LT(max_abs_diff(w.grad(), expected), 1e-12);
  EXPECT_GT(sum(logical_not(mask)).item<int64_t>(), 0);  // some weights were dropped
  EXPECT_EQ(dc.state().param("bias").grad().to_vector<double>(), std::vector<double>(4, 3.0));
}

TEST(DropConnect, DeterministicWithASeed) {
  auto masks = [](uint64_t seed) {
    manual_seed(4);
    nn::Input x(8, Float32, "x");
    nn::DropConnect dc(x, 8, 0.5, {.bias = false, .weight_init = nn::Init::ones(), .seed = seed});
    x.set_value(eye(8));
    nn::ModeScope train(nn::Mode::Train);
    Tensor a = dc(), b = dc();
    return std::vector<Tensor>{a, b};
  };
  const auto m1 = masks(1), m1b = masks(1), m2 = masks(2);
  EXPECT_TRUE(same(m1[0], m1b[0]));
  EXPECT_TRUE(same(m1[1], m1b[1]));
  EXPECT_FALSE(same(m1[0], m1[1]));  // a fresh mask per call
  EXPECT_FALSE(same(m1[0], m2[0]));
  EXPECT_THROW(nn::DropConnect(nn::Input(3), 2, 1.5), ValueError);
  EXPECT_THROW(nn::DropConnect(nn::Input(3), 0, 0.5), ValueError);
}

TEST(DropConnect, OverASparseInputEqualsDense) {
  manual_seed(6);
  Corpus c = corpus(6, 4);
  nn::SparseInput xs(24, Float32, "words");
  nn::DropConnect dc(xs, 3, 0.5, {.bias_init = nn::Init::uniform(-1, 1)}, "dc");
  nn::Input xd(24, Float32, "dense");
  nn::Layer dcd = dc.reuse_with(xd);
  xs.set_value(c.counts);
  xd.set_value(c.dense);
  EXPECT_LT(max_abs_diff(dc(), dcd()), 1e-6);
}
