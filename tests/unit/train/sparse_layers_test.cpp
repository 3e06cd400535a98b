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
#include <loom/data/dataset.h>
#include <loom/data/loader.h>
#include <loom/graph/graph.h>
#include <loom/io/model_file.h>
#include <loom/nn/activation.h>
#include <loom/nn/embedding.h>
#include <loom/nn/init.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/nn/mode.h>
#include <loom/nn/sparse.h>
#include <loom/nn/state.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/losses.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/ops/sparse.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
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

namespace {

// Documents as padded word ids (docs, 8): five words of the class's range (0..9 or 10..19), one
// noise word (20..23), two -1 pads at random places; the same documents as counts (docs, 24).
struct IdCorpus {
  Tensor ids, counts, labels;
};

IdCorpus id_corpus(int64_t docs, uint64_t seed) {
  Generator g(seed);
  const std::vector<int64_t> words = randint(0, 10, {docs, 5}, Int64, default_device(), &g).to_vector<int64_t>();
  const std::vector<int64_t> noise = randint(20, 24, {docs}, Int64, default_device(), &g).to_vector<int64_t>();
  const std::vector<int64_t> pads = randint(0, 8, {docs, 2}, Int64, default_device(), &g).to_vector<int64_t>();
  std::vector<int64_t> ids, labels;
  std::vector<float> counts(static_cast<size_t>(docs * 24), 0.0f);
  for (int64_t d = 0; d < docs; ++d) {
    const int64_t label = (d * 7 / 3) % 2;
    labels.push_back(label);
    std::vector<int64_t> row;
    for (int64_t w = 0; w < 5; ++w) row.push_back(words[static_cast<size_t>(d * 5 + w)] + 10 * label);
    row.push_back(noise[static_cast<size_t>(d)]);
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t at = std::min<int64_t>(pads[static_cast<size_t>(d * 2 + k)], static_cast<int64_t>(row.size()));
      row.insert(row.begin() + at, -1);
    }
    for (int64_t id : row) {
      ids.push_back(id);
      if (id >= 0) counts[static_cast<size_t>(d * 24 + id)] += 1.0f;
    }
  }
  return {from_vector(ids, {docs, 8}), from_vector(counts, {docs, 24}), from_vector(labels, {docs})};
}

}  // namespace

// Lookup over a SparseInput is a bag of ids: the rows' table rows weighted by the values and
// combined as tf.nn.embedding_lookup_sparse does. Checked against the dense formula (counts @
// table, divided per row), values and the table's gradient, with an empty row among them.
TEST(SparseLookup, BagsEqualTheDenseFormulaWithEveryCombiner) {
  manual_seed(11);
  Tensor weights = abs(randn({5, 24})) * (randn({5, 24}) > 0.3);  // non-negative weights, sparse
  weights.index_put_({2}, 0.0);                                     // an empty bag
  const Tensor r = randn({5, 6});
  for (const std::string combiner : {"sum", "mean", "sqrtn"}) {
    SCOPED_TRACE(combiner);
    nn::SparseInput x(24, Float32, "words");
    nn::Lookup emb(x, 24, 6, {.init = nn::Init::uniform(-1, 1), .combiner = combiner}, "emb");
    x.set_value(SparseTensor::from_dense(weights));
    const Tensor table = emb.parameters()[0];
    Tensor y = emb();
    ASSERT_EQ(y.shape(), (Shape{5, 6}));
    // the reference, dense
    Tensor t = table.detach().requires_grad_();
    Tensor d = combiner == "sum" ? ones({5, 1}) : combiner == "mean" ? sum(weights, 1, true) : sqrt(sum(weights * weights, 1, true));
    d = where(d == 0.0, Scalar(1.0), d);
    Tensor ref = matmul(weights, t) / d;
    EXPECT_LT(max_abs_diff(y, ref), 1e-5);
    EXPECT_EQ(abs(y.index({2})).sum().item<float>(), 0.0f);  // the empty bag is zeros
    const Tensor gy = loom::grad(sum(y * r), {table})[0];
    const Tensor gr = loom::grad(sum(ref * r), {t})[0];
    EXPECT_LT(max_abs_diff(gy, gr), 1e-5);
    EXPECT_GT(max(abs(gy)).item<double>(), 0.0);
    // the compiled plan agrees
    EXPECT_LT(max_abs_diff(Graph::build({emb}).compile().run({})[0], y), 1e-6);
  }
}

TEST(SparseLookup, PaddedIdsAreBagsOfCounts) {
  nn::SparseInput x(10, Float32, "words");
  nn::Lookup emb(x, 10, 3, {.init = nn::Init::uniform(-1, 1)}, "emb");
  x.set_value(tensor({{3, 3, 7, -1}, {-1, 0, -1, -1}}, Int64));
  EXPECT_EQ(x.value().nnz(), 4);  // repeats stay entries; they add up
  EXPECT_TRUE(same(x.value().to_dense(), tensor({{0.f, 0.f, 0.f, 2.f, 0.f, 0.f, 0.f, 1.f, 0.f, 0.f},
                                                 {1.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}})));
  const Tensor table = emb.parameters()[0];
  const Tensor expect = stack({table.index({3}) * 2.0 + table.index({7}), table.index({0})}, 0);
  EXPECT_LT(max_abs_diff(emb(), expect), 1e-6);
  // int32 ids work the same; float rows are kept where non-zero
  x.set_value(tensor({{3, 3, 7, -1}, {-1, 0, -1, -1}}));
  EXPECT_LT(max_abs_diff(emb(), expect), 1e-6);
  x.set_value(x.value().to_dense());
  EXPECT_LT(max_abs_diff(emb(), expect), 1e-6);
}

TEST(SparseLookup, BadBagsAndOptionsAreTypedErrors) {
  nn::SparseInput x(10, Float32, "words");
  EXPECT_THROW(nn::Lookup(x, 12, 3), ShapeError);                      // the vocabulary is the input's columns
  EXPECT_THROW(nn::Lookup(x, 10, 3, {.padding_id = 0}), ValueError);   // a bag has no padding
  EXPECT_THROW(nn::Lookup(x, 10, 3, {.combiner = "max"}), ValueError);
  try {
    x.set_value(tensor({{1, 10}}, Int64));
    FAIL() << "an id outside the vocabulary was accepted";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("id 10 in row 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(x.set_value(tensor({{1, -2}}, Int64)), IndexError);
  EXPECT_THROW(x.set_value(zeros({2, 9})), ShapeError);  // float rows need the 10 columns
  EXPECT_THROW(x.set_value(zeros({10})), ShapeError);
  EXPECT_FALSE(x.has_value());  // nothing half-applied
}

TEST(SparseLookup, SavesAndLoadsWithItsCombiner) {
  nn::SparseInput x(24, Float32, "words");
  nn::Lookup emb(x, 24, 4, {.combiner = "sqrtn"}, "emb");
  Graph g = Graph::build({nn::Linear(emb, 2, {}, "out")});
  const std::string path = (std::filesystem::temp_directory_path() / "loom_sparse_lookup.loom").string();
  io::save_model(path, g);
  Graph back = io::load_model(path);
  std::remove(path.c_str());
  const IdCorpus c = id_corpus(6, 4);
  x.set_value(c.ids);
  nn::SparseInput(back.layer("words").impl()).set_value(c.ids);
  EXPECT_TRUE(same(g.compile().run({})[0], back.compile().run({})[0]));
  EXPECT_EQ(back.layer("emb").options().get_string("combiner"), "sqrtn");
}

// A bag-of-words classifier through Model::fit, evaluate and predict: the SparseInput's field
// follows the dense inputs in the batch, as ids (padded) or as float rows.
TEST(SparseFit, BagOfWordsModelTrainsThroughFitOnIds) {
  manual_seed(3);
  const IdCorpus tr = id_corpus(120, 5), te = id_corpus(40, 6);
  nn::SparseInput x(24, Float32, "words");
  nn::Lookup emb(x, 24, 8, {.init = nn::Init::uniform(-0.1, 0.1), .combiner = "mean"}, "emb");
  nn::Linear logits(nn::Activation(emb, nn::relu), 2, {}, "logits");
  const Graph g = Graph::build({logits});
  train::Model m(g, "sparse_categorical_crossentropy", std::make_shared<train::Adam>(g.parameters(), train::AdamOptions{.lr = 0.05}),
                 {"accuracy"});
  train::History h = m.fit(tr.ids, tr.labels, {.epochs = 15, .progress = false, .batch_size = 16, .validation_split = 0.25});
  EXPECT_LT(h.series.at("loss").back(), 0.5 * h.series.at("loss").front());
  EXPECT_GE(h.series.at("val_accuracy").back(), 0.95);
  const train::Logs held_out = m.evaluate(te.ids, te.labels);
  EXPECT_GE(held_out.at("accuracy"), 0.95);
  // predict equals the graph run by hand on the same bags
  const Tensor p = m.predict(te.ids, 16);
  x.set_value(te.ids);
  EXPECT_LT(max_abs_diff(p, g.compile().run({})[0]), 1e-5);
  // a loader of (ids, labels) works the same
  data::DataLoader loader(std::make_shared<data::TensorDataset>(std::vector<Tensor>{te.ids, te.labels}), {.batch_size = 8});
  EXPECT_NEAR(m.evaluate(loader).at("accuracy"), held_out.at("accuracy"), 1e-12);
}

TEST(SparseFit, DenseAndSparseInputsTogether) {
  manual_seed(4);
  const IdCorpus tr = id_corpus(96, 8);
  // a dense feature that is noise, and the bag of words (as float count rows) that decides
  const Tensor noise = randn({96, 3});
  nn::Input dense(3, Float32, "dense");
  nn::SparseInput words(24, Float32, "words");
  nn::Layer logits = nn::Add(nn::Linear(dense, 2, {}, "from_dense"), nn::Linear(words, 2, {}, "from_words"), "logits");
  const Graph g = Graph::build({logits});
  train::Model m(g, "sparse_categorical_crossentropy", std::make_shared<train::Adam>(g.parameters(), train::AdamOptions{.lr = 0.05}),
                 {"accuracy"});
  train::History h = m.fit({noise, tr.counts}, tr.labels, {.epochs = 20, .progress = false, .batch_size = 16});
  EXPECT_GE(h.series.at("accuracy").back(), 0.95);
  EXPECT_EQ(m.predict({noise, tr.counts}).shape(), (Shape{96, 2}));
  // the fields are counted: the dense input alone is not enough
  EXPECT_THROW(m.fit(noise, tr.labels, {.progress = false}), ValueError);
}
