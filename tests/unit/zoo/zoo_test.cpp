#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/serialize.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/mode.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/zoo/architectures.h>

#include <cmath>

using namespace loom;

namespace {

// No NaN or infinity (either makes the sum non-finite).
bool finite(const Tensor& t) { return std::isfinite(sum(abs(astype(t, Float64))).item<double>()); }

Tensor run(const zoo::Network& m, const Tensor& x) {
  m.input().set_value(x);
  Tensor y = m.output();
  m.input().clear();
  return y;
}

}  // namespace

TEST(Zoo, MlpAndLenet) {
  zoo::Network m = zoo::mlp(20, {16, 8}, 3, nn::tanh, 0.1);
  EXPECT_EQ(m.output.shape(), (Shape{-1, 3}));
  EXPECT_EQ(m.parameter_count(), 20 * 16 + 16 + 16 * 8 + 8 + 8 * 3 + 3);
  EXPECT_EQ(m(uniform({4, 20})).shape(), (Shape{4, 3}));

  zoo::Network l = zoo::lenet();
  EXPECT_EQ(l.parameter_count(), 61706);
  EXPECT_EQ(l.graph.inputs().size(), 1u);
  EXPECT_EQ(run(l, uniform({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  EXPECT_EQ(l(uniform({3, 1, 28, 28})).shape(), (Shape{3, 10}));
}

TEST(Zoo, VggForward) {
  // 32x32 leaves 1x1 after five pools; the adaptive pool repeats it to 7x7 as torchvision does
  zoo::Network v = zoo::vgg11(10);
  EXPECT_EQ(v.output.shape(), (Shape{-1, 10}));
  Tensor y = v(uniform({1, 3, 32, 32}));
  EXPECT_EQ(y.shape(), (Shape{1, 10}));
  EXPECT_TRUE(finite(y));
}

TEST(Zoo, Vgg16Builds) {
  zoo::Network v = zoo::vgg16(10, /*batch_norm=*/true);
  EXPECT_EQ(v.name, "vgg16_bn");
  EXPECT_EQ(v(uniform({1, 3, 32, 32})).shape(), (Shape{1, 10}));
}

TEST(Zoo, Vgg19Builds) {
  zoo::Network v = zoo::vgg19(10);
  EXPECT_EQ(v.name, "vgg19");
  EXPECT_EQ(v.parameter_count(), 139611210);  // torchvision.models.vgg19(num_classes=10)
  EXPECT_EQ(v(uniform({1, 3, 32, 32})).shape(), (Shape{1, 10}));
}

TEST(Zoo, ResNetForward) {
  zoo::Network r18 = zoo::resnet18();
  EXPECT_EQ(r18.parameter_count(), 11689512);
  EXPECT_EQ(r18(uniform({1, 3, 64, 64})).shape(), (Shape{1, 1000}));
  zoo::Network r34 = zoo::resnet34(7);
  EXPECT_EQ(r34(uniform({2, 3, 32, 32})).shape(), (Shape{2, 7}));
}

TEST(Zoo, DenseNetForward) {
  zoo::Network d = zoo::densenet121();
  EXPECT_EQ(d.parameter_count(), 7978856);
  Tensor y = d(uniform({1, 3, 32, 32}));
  EXPECT_EQ(y.shape(), (Shape{1, 1000}));
  EXPECT_TRUE(finite(y));
}

TEST(Zoo, UNetForward) {
  zoo::Network u = zoo::unet(3, 4, 8, 3);
  EXPECT_EQ(u.output.shape(), (Shape{-1, 4, -1, -1}));
  EXPECT_EQ(u(uniform({2, 3, 32, 24})).shape(), (Shape{2, 4, 32, 24}));
  zoo::Network ub = zoo::unet(1, 2, 4, 2, /*batch_norm=*/true);
  EXPECT_EQ(ub(uniform({1, 1, 16, 16})).shape(), (Shape{1, 2, 16, 16}));
}

TEST(Zoo, SequenceModelsForward) {
  zoo::Network lm = zoo::lstm_lm(50, 16, 24, 2, 0.1);
  EXPECT_EQ(lm.parameter_count(), 50 * 16 + (4 * 24 * (16 + 24) + 8 * 24) + (4 * 24 * 48 + 8 * 24) + 24 * 50 + 50);
  Tensor ids = randint(0, 50, {3, 7});
  EXPECT_EQ(lm(ids).shape(), (Shape{3, 7, 50}));

  zoo::Network tc = zoo::transformer_classifier(60, 10, 32, 4, 64, 2, 3, 0.1);
  EXPECT_EQ(tc.output.shape(), (Shape{-1, 3}));
  EXPECT_EQ(tc(randint(0, 60, {2, 10})).shape(), (Shape{2, 3}));
  {
    nn::ModeScope train(nn::Mode::Train);
    EXPECT_EQ(tc(randint(0, 60, {2, 10})).shape(), (Shape{2, 3}));
  }
  EXPECT_THROW(zoo::transformer_classifier(60, 10, 30, 4, 64, 2, 3), ValueError);
}

TEST(Zoo, ResNet18BackwardReachesEveryParameter) {
  zoo::Network r = zoo::resnet18(10);
  const auto params = r.parameters();
  EXPECT_EQ(params.size(), 62u);  // as torchvision's resnet18.parameters()
  nn::ModeScope train(nn::Mode::Train);
  Tensor y = r(uniform({2, 3, 32, 32}));
  Tensor loss = mean(square(y));
  loss.backward();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i << " " << shape_str(params[i].shape());
    EXPECT_EQ(params[i].grad().shape(), params[i].shape());
    EXPECT_TRUE(finite(params[i].grad()));
    EXPECT_GT(sum(abs(params[i].grad())).item<double>(), 0.0) << "parameter " << i << " " << shape_str(params[i].shape());
  }
}

TEST(Zoo, JsonRoundTripKeepsOutputs) {
  for (zoo::Network m : {zoo::lenet(), zoo::resnet18(10)}) {
    Graph copy = graph_from_json(graph_to_json(m.graph));
    EXPECT_EQ(copy.nodes().size(), m.graph.nodes().size());
    EXPECT_EQ(zoo::parameter_count(copy), m.parameter_count());
    copy_state(m.graph, copy);
    Tensor x = m.name == "lenet" ? uniform({2, 1, 28, 28}) : uniform({2, 3, 32, 32});
    Tensor a = m.graph.compile()(x);
    Tensor b = copy.compile()(x);
    EXPECT_EQ(a.shape(), b.shape()) << m.name;
    EXPECT_TRUE(array_equal(a, b)) << m.name;
  }
}

TEST(Zoo, EveryBuilderSurvivesJson) {
  const std::vector<std::pair<zoo::Network, Tensor>> cases = {
      {zoo::mlp(12, {8, 8}, 3, nn::gelu, 0.3), uniform({2, 12})},
      {zoo::vgg({8, 0, 8, 0}, 5, true, 0.5, 3, 16, "vgg_tiny"), uniform({2, 3, 10, 10})},  // adaptive pool 2x2 -> 7x7
      {zoo::densenet(8, {2, 3}, 16, 2, 0.5, 4, 3, "densenet_tiny"), uniform({2, 3, 32, 32})},
      {zoo::unet(2, 3, 4, 2, true), uniform({1, 2, 8, 12})},
      {zoo::lstm_lm(30, 8, 12, 2, 0.1), randint(0, 30, {2, 5})},
      {zoo::transformer_classifier(40, 6, 16, 2, 32, 2, 3), randint(0, 40, {2, 6})},
  };
  for (const auto& [m, x] : cases) {
    Graph copy = graph_from_json(graph_to_json(m.graph));
    EXPECT_EQ(zoo::parameter_count(copy), m.parameter_count()) << m.name;
    copy_state(m.graph, copy);
    EXPECT_TRUE(array_equal(m.graph.compile()(x), copy.compile()(x))) << m.name;
  }
}

TEST(Zoo, FashionCnnIsTheMainJobsModel) {
  zoo::Network m = zoo::fashion_cnn();
  // 288 + 64 + 18432 + 128 + 73728 + 256 + 294912 + 256 + 2570 (bn: weight, bias per channel)
  EXPECT_EQ(m.parameter_count(), 390634);
  EXPECT_EQ(m(zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  // the training-step benchmarks' CNN: two blocks, hidden 128
  zoo::Network b = zoo::fashion_cnn(10, {.widths = {32, 64}, .hidden = 128});
  EXPECT_EQ(b.parameter_count(), 421738);  // 288 + 64 + 18432 + 128 + 401408 + 128 + 1290
  // two convolutions per block: conv1..conv4, each with its batch norm
  zoo::Network d = zoo::fashion_cnn(10, {.widths = {8, 16}, .convs_per_block = 2, .hidden = 32});
  EXPECT_EQ(d.graph.layer("conv4").shape(), (Shape{-1, 16, 14, 14}));
  EXPECT_EQ(d(zeros({1, 1, 28, 28})).shape(), (Shape{1, 10}));
  EXPECT_THROW(zoo::fashion_cnn(10, {.widths = {}}), ValueError);
  EXPECT_THROW(zoo::fashion_cnn(10, {.widths = {8, 8, 8, 8, 8}}), ValueError);
  EXPECT_THROW(zoo::fashion_cnn(10, {.widths = {8, 0}}), ValueError);
  EXPECT_THROW(zoo::fashion_cnn(10, {.convs_per_block = 0}), ValueError);
}

TEST(Zoo, CallRunsThePlanOfTheCurrentGraph) {
  zoo::Network m = zoo::mlp(6, {5}, 3);
  ASSERT_TRUE(m.plan);  // compiled once by the builder
  const Tensor x = uniform({4, 6});
  const Tensor y = m(x);
  EXPECT_TRUE(array_equal(y, m.plan->run({x})[0]));
  // a Network whose graph was replaced follows its new graph, not the stale plan
  zoo::Network other = zoo::mlp(6, {5}, 3);
  m.graph = other.graph;
  m.inputs = other.inputs;
  m.output = other.output;
  EXPECT_TRUE(array_equal(m(x), other(x)));
  EXPECT_FALSE(array_equal(m(x), y));  // the two networks' weights differ
}
