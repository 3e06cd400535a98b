// Issue 36, "the first hour of a Keras or PyTorch user": Keras' fit / evaluate / predict on
// tensors, losses, metrics and optimizers passed as plain functions or by Keras' names.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/loader.h>
#include <loom/graph/graph.h>
#include <loom/nn/activation.h>
#include <loom/nn/dropout.h>
#include <loom/nn/mode.h>
#include <loom/nn/input.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/loss.h>
#include <loom/train/losses.h>
#include <loom/train/metric_list.h>
#include <loom/train/metrics.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>

#include "unit/common/core_test_util.h"
#include "unit/train/train_test_util.h"

using namespace loom;
namespace tr = loom::train;
using loom_test::blobs;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

struct Mlp {
  nn::Input x{4, Float32, "x"};
  nn::Linear h{x, 8, {}, "h"};
  nn::Activation a{h, nn::relu, "a"};
  nn::Linear out{a, 3, {}, "out"};
  Graph graph = Graph::build({out}, {x});
};

std::vector<Tensor> weights(const Graph& g) {
  std::vector<Tensor> w;
  for (const Tensor& p : g.parameters()) w.push_back(p.copy());
  return w;
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(array_equal(a[i], b[i])) << i;
}

}  // namespace

// train::Model(graph, train::cross_entropy, optimizer) compiles (the losses' two-argument
// overloads) and trains exactly as the lambda the docs used to need.
TEST(FirstHour, LossesAreFunctionsAndNames) {
  auto data = blobs(96, 1);
  data::DataLoader loader(data, {.batch_size = 32});
  std::vector<Tensor> runs[3];
  for (int i = 0; i < 3; ++i) {
    manual_seed(4);
    Mlp net;
    auto sgd = std::make_shared<tr::SGD>(net.graph.parameters(), tr::SGDOptions{.lr = 0.1});
    tr::Model m = i == 0   ? tr::Model(net.graph, [](const Tensor& y, const Tensor& t) { return tr::cross_entropy(y, t); }, sgd)
                  : i == 1 ? tr::Model(net.graph, tr::cross_entropy, sgd)
                           : tr::Model(net.graph, "sparse_categorical_crossentropy", sgd);
    m.fit(loader, {.epochs = 2, .progress = false});
    runs[i] = weights(net.graph);
  }
  expect_same(runs[0], runs[1]);
  expect_same(runs[0], runs[2]);
  // every loss of losses.h by name is the function's default
  Tensor p = uniform({6}, 0.1, 0.9, Float64), t = uniform({6}, 0.1, 0.9, Float64);
  EXPECT_EQ(tr::Loss("mse")(p, t).item<double>(), tr::mse(p, t).item<double>());
  EXPECT_EQ(tr::Loss("mean_absolute_error")(p, t).item<double>(), tr::mae(p, t).item<double>());
  EXPECT_EQ(tr::Loss("huber")(p, t).item<double>(), tr::huber(p, t, 1.0).item<double>());
  EXPECT_EQ(tr::Loss("binary_crossentropy")(p, t).item<double>(), tr::binary_cross_entropy(p, t, Reduction::Mean).item<double>());
  EXPECT_EQ(tr::Loss(tr::mse)(p, t).item<double>(), tr::mse(p, t).item<double>());
  const std::string msg = error_message<ValueError>([] { tr::Loss("mean_sqared_error"); });
  EXPECT_TRUE(contains_all(msg, {"mean_sqared_error", "mse", "sparse_categorical_crossentropy", "binary_crossentropy"})) << msg;
}

TEST(FirstHour, OptimizersAndMetricsByName) {
  manual_seed(5);
  Mlp net;
  tr::Model m(net.graph, "sparse_categorical_crossentropy", "adam",
              {"accuracy", std::make_shared<tr::TopKAccuracy>(2), tr::accuracy,
               {"mean_logit", [](const Tensor& y, const Tensor&) { return mean(y).item<double>(); }}});
  EXPECT_EQ(m.optimizer().name(), "Adam");
  EXPECT_EQ(m.optimizer().lr(), 1e-3);
  EXPECT_EQ(m.optimizer().params().size(), net.graph.parameters().size());
  auto data = blobs(64, 2);
  data::DataLoader loader(data, {.batch_size = 64});
  tr::Logs logs = m.evaluate(loader);
  // the streaming metrics against the functions over the whole data (one batch here)
  Tensor y = m.predict(data->tensors()[0]);
  EXPECT_EQ(logs.at("accuracy"), tr::accuracy(y, data->tensors()[1]));
  EXPECT_EQ(logs.at("top2_accuracy"), tr::top_k_accuracy(y, data->tensors()[1], 2));
  EXPECT_DOUBLE_EQ(logs.at("mean_logit"), mean(y).item<double>());
  for (const char* name : {"sgd", "SGD", "adamw", "rmsprop", "adagrad"})
    EXPECT_EQ(tr::make_optimizer(name, net.graph.parameters())->params().size(), net.graph.parameters().size()) << name;
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tr::Model(net.graph, "mse", "adamm"); }), {"adamm", "sgd", "adam", "rmsprop"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tr::Model(net.graph, "mse", "sgd", {"acuracy"}); }),
                           {"acuracy", "accuracy", "mse"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { tr::MetricSpec(+[](const Tensor&, const Tensor&) { return 0.0; }); }),
                           {"name"}));
}

// Keras' fit(x, y, validation_split=...): the last fraction held out before shuffling; the
// same training as a loader over the first part with a validation loader over the rest.
TEST(FirstHour, FitEvaluatePredictOnTensors) {
  auto data = blobs(200, 3);
  const Tensor x = data->tensors()[0], y = data->tensors()[1];
  manual_seed(6);
  Mlp a;
  tr::Model ma(a.graph, tr::cross_entropy, "sgd", {"accuracy"});
  tr::History ha = ma.fit(x, y, {.epochs = 2, .progress = false, .batch_size = 16, .validation_split = 0.25, .seed = 9});
  manual_seed(6);
  Mlp b;
  tr::Model mb(b.graph, tr::cross_entropy, "sgd", {"accuracy"});
  data::DataLoader train(std::make_shared<data::TensorDataset>(std::vector<Tensor>{slice(x, 0, 0, 150), slice(y, 0, 0, 150)}),
                         {.batch_size = 16, .shuffle = true, .seed = 9});
  data::DataLoader val(std::make_shared<data::TensorDataset>(std::vector<Tensor>{slice(x, 0, 150, 200), slice(y, 0, 150, 200)}),
                       {.batch_size = 16});
  tr::History hb = mb.fit(train, {.epochs = 2, .validation = &val, .progress = false});
  expect_same(weights(a.graph), weights(b.graph));
  EXPECT_EQ(ha.series, hb.series);
  ASSERT_EQ(ha["val_accuracy"].size(), 2u);
  // evaluate and predict on tensors: the loader versions' results
  const tr::Logs ea = ma.evaluate(slice(x, 0, 150, 200), slice(y, 0, 150, 200), 16);
  EXPECT_EQ(ea, mb.evaluate(val));
  EXPECT_TRUE(array_equal(ma.predict(x), mb.predict(x, 7)));
  // shuffle off: the samples in order
  manual_seed(6);
  Mlp c;
  tr::Model mc(c.graph, tr::cross_entropy, "sgd");
  mc.fit(x, y, {.progress = false, .batch_size = 50, .shuffle = false});
  manual_seed(6);
  Mlp d;
  tr::Model md(d.graph, tr::cross_entropy, "sgd");
  data::DataLoader ordered(data, {.batch_size = 50});
  md.fit(ordered, {.progress = false});
  expect_same(weights(c.graph), weights(d.graph));
  // errors
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { ma.fit(x, slice(y, 0, 0, 10), {.progress = false}); }), {"200", "(10,)"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { ma.fit(x, y, {.progress = false, .validation_split = 1.0}); }),
                           {"validation_split", "[0, 1)"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { ma.predict(std::vector<Tensor>{x, x}); }), {"2 input", "1 input"}));
}

// A graph of two inputs: fit, evaluate and predict take one tensor per input, in order.
TEST(FirstHour, SeveralInputs) {
  manual_seed(7);
  nn::Input x1(2, Float32, "x1"), x2(2, Float32, "x2");
  nn::Concat both({x1, x2}, -1, "both");
  nn::Linear out(both, 3, {}, "out");
  Graph g = Graph::build({out}, {x1, x2});
  tr::Model m(g, tr::cross_entropy, "adam", {"accuracy"});
  auto data = blobs(120, 4);
  const Tensor x = data->tensors()[0], y = data->tensors()[1];
  const Tensor a = slice(x, 1, 0, 2), b = slice(x, 1, 2, 4);
  tr::History h = m.fit({a, b}, y, {.epochs = 3, .progress = false, .batch_size = 20});
  EXPECT_EQ(h["loss"].size(), 3u);
  EXPECT_LT(h["loss"].back(), h["loss"].front());
  const Tensor p = m.predict({a, b}, 50);
  EXPECT_EQ(p.shape(), (Shape{120, 3}));
  EXPECT_EQ(m.evaluate({a, b}, y).at("accuracy"), tr::accuracy(p, y));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { m.predict(x); }), {"2 inputs", "predict({x1, x2, ...})"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { m.predict({a, slice(b, 0, 0, 5)}); }), {"input 1", "5 rows"}));
}

// A C++ floating literal makes float64 (as NumPy); meeting a float32 Input, the error says both
// fixes.
TEST(FirstHour, AFloat64LiteralIntoAFloat32InputSaysTheFix) {
  nn::Input x(2, Float32, "x");
  nn::Linear out(x, 1, {}, "out");
  Graph g = Graph::build({out}, {x});
  Plan plan(g);
  const Tensor literal = tensor({1.0, 2.0}).reshape({1, 2});
  for (const std::string& msg : {error_message<DTypeError>([&] { plan.run({literal}); }),
                                 error_message<DTypeError>([&] { x.set_value(literal); })})
    EXPECT_TRUE(contains_all(msg, {"float64", "float32", "x.astype(Float32)", "tensor({...}, Float32)"})) << msg;
  EXPECT_EQ(plan.run({tensor({1.0, 2.0}, Float32).reshape({1, 2})})[0].shape(), (Shape{1, 1}));
}

// A graph of two outputs (the error "the graph must have one output" is gone): a loss, weight
// and metrics per output by name, Keras' History keys, the same training as the hand-written
// weighted sum of the two losses.
TEST(FirstHour, SeveralOutputs) {
  auto data = blobs(96, 5);
  const Tensor x = data->tensors()[0], labels = data->tensors()[1];
  const Tensor target = sum(x, {1}, true) * 0.5;  // (N, 1) regression target
  auto build = [] {
    manual_seed(12);
    nn::Input in(4, Float32, "x");
    nn::Linear h(in, 8, {}, "h");
    nn::Linear cls(h, 3, {}, "cls");
    nn::Linear reg(h, 1, {}, "reg");
    return Graph::build({cls, reg}, {in});
  };
  Graph g = build();
  tr::Model m(g,
              {{.output = "reg", .loss = tr::mse, .weight = 0.5},
               {.output = "cls", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}}},
              std::make_shared<tr::SGD>(g.parameters(), tr::SGDOptions{.lr = 0.05}));
  tr::History h = m.fit({x}, {labels, target}, {.epochs = 1, .progress = false, .batch_size = 32, .shuffle = false});
  for (const char* key : {"loss", "cls_loss", "reg_loss", "cls_accuracy", "lr"}) EXPECT_EQ(h[key].size(), 1u) << key;
  // the hand-written loop: cross_entropy(cls) + 0.5 mse(reg), batch by batch
  Graph ref = build();
  tr::SGD opt(ref.parameters(), {.lr = 0.05});
  Plan plan(ref);
  for (int64_t b = 0; b < 96; b += 32) {
    const std::vector<Tensor> outs = plan.run({slice(x, 0, b, b + 32)});
    Tensor loss = tr::cross_entropy(outs[0], slice(labels, 0, b, b + 32)) + tr::mse(outs[1], slice(target, 0, b, b + 32)) * 0.5;
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  expect_same(weights(g), weights(ref));
  // evaluate: the weighted total and each output's loss and metrics
  const tr::Logs e = m.evaluate({x}, {labels, target}, 96);
  const std::vector<Tensor> p = m.predict_all({x});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NEAR(e.at("cls_loss"), tr::cross_entropy(p[0], labels).item<double>(), 1e-6);
  EXPECT_NEAR(e.at("reg_loss"), tr::mse(p[1], target).item<double>(), 1e-6);
  EXPECT_NEAR(e.at("loss"), e.at("cls_loss") + 0.5 * e.at("reg_loss"), 1e-9);
  EXPECT_EQ(e.at("cls_accuracy"), tr::accuracy(p[0], labels));
  // validation keys, Keras' naming
  tr::History hv = m.fit({x}, {labels, target}, {.progress = false, .validation_split = 0.25});
  for (const char* key : {"val_loss", "val_cls_loss", "val_reg_loss", "val_cls_accuracy"}) EXPECT_TRUE(hv.has(key)) << key;
  // one loss for every output (Keras), and the errors
  tr::Model same(g, tr::mse, "sgd", {"mae"});
  const Tensor onehot = zeros({96, 3}) + 0.25;
  const tr::Logs es = same.evaluate({x}, {onehot, target}, 96);
  const std::vector<Tensor> q = same.predict_all({x});
  EXPECT_NEAR(es.at("cls_loss"), tr::mse(q[0], onehot).item<double>(), 1e-6);
  EXPECT_NEAR(es.at("reg_mae"), tr::mean_absolute_error(q[1], target), 1e-9);
  EXPECT_NEAR(es.at("cls_mae"), tr::mean_absolute_error(q[0], onehot), 1e-9);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { m.predict(x); }), {"2 outputs", "predict_all"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tr::Model(g, {{.output = "box", .loss = tr::mse}}, "sgd"); }),
                           {"'box'", "'cls'", "'reg'"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tr::Model(g, {{.loss = tr::mse}}, "sgd"); }), {"1 losses", "2 outputs"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { m.fit({x}, labels, {.progress = false}); }), {"1 target", "2 output"}));
}

// Calling a layer on a tensor is its value, at once (Keras' layer(tensor), PyTorch's module(x));
// calling it on a layer builds a graph node; () evaluates the graph ending in a layer.
TEST(FirstHour, CallingALayerOnATensorIsItsValue) {
  manual_seed(3);
  nn::Linear dense(5, {}, "eager_dense");  // made without input
  const Tensor x = randn({4, 3});
  const Tensor y = dense(x);               // bound for (-1, 3) by this first call
  EXPECT_EQ(y.shape(), (Shape{4, 5}));
  const Tensor w = dense.state().param("weights"), b = dense.state().param("bias");
  EXPECT_TRUE(allclose(y, matmul(x, w) + b, 1e-6, 1e-6));
  sum(dense(x)).backward();                // gradients reach the parameters
  EXPECT_TRUE(w.grad().defined());
  // the graph form, side by side: a node sharing the weights, evaluated by ()
  nn::Input in(3, Float32, "eager_in");
  nn::Layer node = dense(in);
  in.set_value(x);
  EXPECT_TRUE(allclose(node(), y, 1e-6, 1e-6));
  // a layer on a graph: on a tensor, this layer alone
  nn::Activation act(node, nn::relu, "eager_relu");
  EXPECT_TRUE(array_equal(act(y), relu(y)));
  // in the current mode: dropout only under ModeScope(Train)
  nn::Dropout drop(0.5, 1, "eager_dropout");
  const Tensor ones8 = ones({8, 16});
  EXPECT_TRUE(array_equal(drop(ones8), ones8));
  {
    nn::ModeScope train(nn::Mode::Train);
    EXPECT_FALSE(array_equal(drop(ones8), ones8));
  }
  EXPECT_TRUE(contains_all(error_message<ValueError>([] {
                             nn::Input a(2, Float32, "ea"), c(2, Float32, "ec");
                             nn::Add both(a, c);
                             both(ones({1, 2}));
                           }),
                           {"takes 2 inputs", "compute({x1, x2, ...})"}));
}
