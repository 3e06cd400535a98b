// The layer kinds' contracts (docs/architecture.md, "Contracts"): each kind's shape rule gives its
// output shapes for new input shapes (reuse_with, compile) without running anything; attributes
// are typed structs whose one field list gives options, reads and equality; the compiler matches
// kinds by their attribute types, never by the kind's name.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <string>

#include "core_test_util.h"

using namespace loom;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A user's kind that calls itself "Conv2D" (any name is allowed for kinds that are not saved): it
// is not a convolution, and nothing may treat it as one.
struct NamedLikeConv final : nn::LayerBase<NamedLikeConv> {
  const char* kind() const override { return "Conv2D"; }
  bool pure() const override { return true; }
  Tensor compute(const std::vector<Tensor>& in, nn::Mode) override { return in[0] * 2.0; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
};

nn::Layer named_like_conv(const nn::Layer& input, const std::string& name) {
  auto impl = std::make_shared<NamedLikeConv>();
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = name;
  return nn::Layer(impl);
}

}  // namespace

TEST(LayerContracts, ReuseWithTakesTheNewInputsSpatialSizes) {
  manual_seed(1);
  nn::Input small(Shape{-1, 3, 16, 16}, Float32, "small");
  nn::Input large(Shape{-1, 3, 40, 24}, Float32, "large");
  nn::Conv2D conv(small, 4, {3, 3}, {.stride = 2}, "conv");
  nn::MaxPool2D pool(conv, {2, 2}, {}, "pool");
  nn::Conv2DTranspose up(pool, 2, {2, 2}, {.stride = 2}, "up");
  EXPECT_EQ(conv.shape(), (Shape{-1, 4, 7, 7}));
  const nn::Layer conv2 = conv.reuse_with(large);
  const nn::Layer pool2 = pool.reuse_with(conv2);
  const nn::Layer up2 = up.reuse_with(pool2);
  EXPECT_EQ(conv2.shape(), (Shape{-1, 4, 19, 11}));  // was (-1, 4, 7, 7): the old height and width
  EXPECT_EQ(pool2.shape(), (Shape{-1, 4, 9, 5}));
  EXPECT_EQ(up2.shape(), (Shape{-1, 2, 18, 10}));
  // what the rule says is what running gives
  large.set_value(uniform({2, 3, 40, 24}));
  EXPECT_EQ(up2().shape(), (Shape{2, 2, 18, 10}));
  // a Module reused on another size: its inner graph by the inner kinds' rules (its input
  // declares open sizes; one declared 16 x 16 would refuse 40 x 24, naming itself)
  nn::Input any(Shape{-1, 3, -1, -1}, Float32, "any");
  const nn::Layer inner = up.reuse_with(pool.reuse_with(conv.reuse_with(any)));
  EXPECT_EQ(inner.shape(), (Shape{-1, 2, -1, -1}));
  nn::Module block({any}, inner, "block");
  EXPECT_EQ(block.reuse_with(large).shape(), (Shape{-1, 2, 18, 10}));
  nn::Module fixed({small}, up, "fixed");
  EXPECT_THROW(fixed.reuse_with(large), ShapeError);
  // inputs its state cannot take are refused by the rule, naming the layer
  nn::Input tiny(Shape{-1, 3, 2, 2}, Float32, "tiny");
  try {
    conv.reuse_with(tiny);
    ADD_FAILURE() << "a 2x2 input reached a 3x3 kernel";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(has(e.what(), "Conv2D")) << e.what();
  }
}

TEST(LayerContracts, CompileLearnsShapesWithoutRunningAnything) {
  manual_seed(2);
  int calls = 0;
  nn::Input x(Shape{-1, 3, -1, -1}, Float32, "x");
  nn::Lambda counted({x}, [&](const std::vector<Tensor>& a) { ++calls; return a[0]; }, Shape{-1, 3, -1, -1}, Float32, "counted");
  nn::Conv2D conv(counted, 8, {3, 3}, {.padding = "same"}, "conv");
  nn::GlobalPool pooled(conv, nn::GlobalPool::Mode::Avg, "pooled");
  const Graph g = Graph::build({pooled}, {x});
  const Plan plan = g.compile({{5, 3, 12, 9}});
  EXPECT_EQ(calls, 0);
  // the Lambda has no rule: its declared (-1, 3, -1, -1) takes the batch; its other sizes stay open
  EXPECT_TRUE(has(plan.dump(), ": Lambda 'counted' (5, 3, -1, -1)")) << plan.dump();
  EXPECT_EQ(plan.output_shapes(), (std::vector<Shape>{{5, 8}}));
  EXPECT_EQ(plan(uniform({5, 3, 12, 9})).shape(), (Shape{5, 8}));
  EXPECT_EQ(calls, 1);
}

TEST(LayerContracts, AttributesComeFromOneFieldList) {
  const nn::ConvAttributes a{.filters = 8, .kernel_size = {3, 3}, .stride = {2, 2}, .padding = "same"};
  const nn::Options o = nn::write_attributes(a);
  EXPECT_EQ(o.get_int("filters"), 8);
  EXPECT_EQ(o.get_string("padding"), "same");
  const auto back = nn::read_attributes<nn::ConvAttributes>(nn::Options::from_json(o.to_json()));
  EXPECT_TRUE(nn::same_attributes(a, back));
  nn::ConvAttributes other = back;
  other.groups = 2;
  EXPECT_FALSE(nn::same_attributes(a, other));
  // a read names the field and what would be valid
  nn::Options bad = o;
  bad.set_int("filters", 0);
  try {
    (void)nn::read_attributes<nn::ConvAttributes>(bad);
    ADD_FAILURE() << "0 filters were read";
  } catch (const ValueError& e) {
    EXPECT_TRUE(has(e.what(), "'filters'")) << e.what();
  }
  // a built layer gives its struct by type, and nullptr for another kind's
  nn::Input x(Shape{-1, 2, 6, 6}, Float32, "x");
  nn::Conv2D conv(x, 4, {3, 3}, {}, "c");
  ASSERT_NE(nn::attributes_of<nn::ConvAttributes>(conv), nullptr);
  EXPECT_EQ(nn::attributes_of<nn::ConvAttributes>(conv)->kernel_size, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(nn::attributes_of<nn::BatchNormOptions>(conv), nullptr);
  EXPECT_EQ(conv.options().to_json(), nn::write_attributes(*nn::attributes_of<nn::ConvAttributes>(conv)).to_json());
}

// The compiler's fusions match attribute types: a kind named "Conv2D" that is no convolution,
// or an activation named "relu" that is another function, is never fused; the real ones are.
TEST(LayerContracts, FusionsMatchTypesNotNames) {
  manual_seed(3);
  nn::ModeScope eval(nn::Mode::Eval);
  nn::Input x(Shape{-1, 4, 6, 6}, Float32, "x");
  nn::Conv2D real(x, 4, {3, 3}, {.padding = "same"}, "real");
  nn::BatchNorm real_bn(real, {}, "real_bn");
  nn::Activation real_relu(real_bn, nn::relu, "real_relu");
  const nn::Layer fake = named_like_conv(x, "fake");
  nn::BatchNorm fake_bn(fake, {}, "fake_bn");
  const nn::ActivationFn not_relu{"relu", [](const Tensor& t) { return t * 3.0; }};
  nn::Conv2D conv3(x, 4, {3, 3}, {.padding = "same"}, "conv3");
  nn::Activation other(conv3, not_relu, "other");
  const Graph g = Graph::build({real_relu, fake_bn, other}, {x});
  const Plan plan = g.compile();
  const std::string dump = plan.dump();
  EXPECT_TRUE(has(dump, "fuse   Conv2D 'real' + BatchNorm 'real_bn' + Activation 'real_relu'")) << dump;
  EXPECT_FALSE(has(dump, "Conv2D 'fake' +")) << dump;
  EXPECT_FALSE(has(dump, "+ Activation 'other'")) << dump;
  // and the values are those of each layer's own op
  const Tensor xv = uniform({2, 4, 6, 6});
  const std::vector<Tensor> out = plan.run({xv});
  EXPECT_TRUE(allclose(out[2], conv3.compute(xv) * 3.0));
  EXPECT_TRUE(allclose(out[1], fake_bn.compute(xv * 2.0)));
}

// Every pass says in the dump what it changed, by name.
TEST(LayerContracts, TheDumpNamesEachPassAndItsChanges) {
  manual_seed(4);
  nn::ModeScope eval(nn::Mode::Eval);
  zoo::Network net = zoo::resnet({1, 1, 1, 1}, 5, 3, "resnet_passes");
  const std::string dump = net.graph.compile({{2, 3, 32, 32}}).dump();
  for (const char* pass : {"shapes", "fold", "merge", "dead", "schedule", "conv epilogues", "blocked layouts",
                           "elementwise chains", "in place", "peak memory"})
    EXPECT_TRUE(has(dump, std::string("pass ") + pass + ":")) << pass << "\n" << dump;
  EXPECT_TRUE(has(dump, "pass conv epilogues: ")) << dump;
  EXPECT_FALSE(has(dump, "pass conv epilogues: nothing changed")) << dump;
  EXPECT_FALSE(has(dump, "pass blocked layouts: nothing changed")) << dump;
  CompileOptions off;
  off.fuse_conv_epilogues = false;
  const std::string plain = net.graph.compile(off).dump();
  EXPECT_TRUE(has(plain, "pass conv epilogues: off")) << plain;
  EXPECT_TRUE(has(plain, "pass blocked layouts: off")) << plain;
}
