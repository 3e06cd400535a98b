// The layer kinds' contracts (docs/architecture.md, "Contracts"): each kind's shape rule gives its
// output shapes for new input shapes (reuse_with, compile) without running anything; attributes
// are typed structs whose one field list gives options, reads and equality; the compiler matches
// kinds by their attribute types, never by the kind's name.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/nn/activation.h>
#include <loom/nn/attention.h>
#include <loom/nn/attributes.h>
#include <loom/nn/conv.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/layer.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/options.h>
#include <loom/nn/pooling.h>
#include <loom/nn/recurrent.h>
#include <loom/nn/sparse.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/zoo/architectures.h>

#include <string>

#include "unit/common/core_test_util.h"

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
  EXPECT_TRUE(has(dump, "pass conv epilogues:\n    fuse   Conv2D")) << dump;
  EXPECT_FALSE(has(dump, "pass conv epilogues: nothing changed")) << dump;
  EXPECT_FALSE(has(dump, "pass blocked layouts: nothing changed")) << dump;
  CompileOptions off;
  off.fuse_conv_epilogues = false;
  const std::string plain = net.graph.compile(off).dump();
  EXPECT_TRUE(has(plain, "pass conv epilogues: off")) << plain;
  EXPECT_TRUE(has(plain, "pass blocked layouts: off")) << plain;
}

// ---------------------------------------------------------------- recurrent, attention, sparse,
// adaptive pooling and sources: each kind's rule follows the inputs' lengths and sizes, equals
// what running gives, and compile() learns it without running anything.

namespace {

// A Lambda beside the graph's real outputs that counts its runs: compile() must not run it. It has
// no rule of its own: its sizes besides the batch stay open in the plan.
nn::Layer counting(const nn::Layer& input, int& calls) {
  return nn::Lambda({input}, [&calls](const std::vector<Tensor>& a) { ++calls; return a[0]; }, input.shape(), input.dtype(),
                    input.name() + "_counted");
}

}  // namespace

TEST(LayerContracts, RecurrentRulesFollowTheSequenceLength) {
  manual_seed(5);
  nn::ModeScope eval(nn::Mode::Eval);
  nn::Input x(Shape{-1, 5, 3}, Float32, "x");
  nn::RNN seq(x, 4, {.cell = nn::CellKind::GRU, .bidirectional = true}, "seq");
  nn::RNN last(seq, 2, {.cell = nn::CellKind::LSTM, .return_sequences = false}, "last");
  EXPECT_EQ(seq.shape(), (Shape{-1, 5, 8}));
  EXPECT_EQ(last.shape(), (Shape{-1, 2}));
  // reuse_with onto another length: (batch, time, units) for that time
  nn::Input longer(Shape{-1, 9, 3}, Float32, "longer");
  const nn::Layer seq2 = seq.reuse_with(longer);
  const nn::Layer last2 = last.reuse_with(seq2);
  EXPECT_EQ(seq2.shape(), (Shape{-1, 9, 8}));  // was (-1, 5, 8) before the rule
  EXPECT_EQ(last2.shape(), (Shape{-1, 2}));
  longer.set_value(uniform({2, 9, 3}));
  EXPECT_EQ(seq2().shape(), (Shape{2, 9, 8}));
  EXPECT_EQ(last2().shape(), (Shape{2, 2}));
  // compile for concrete shapes: nothing runs, and the plan's shapes are the run's
  int calls = 0;
  nn::Input any(Shape{-1, -1, 3}, Float32, "any");
  const nn::Layer seq3 = seq.reuse_with(any, "seq3");
  const Graph g = Graph::build({seq3, last.reuse_with(seq3, "last3"), counting(any, calls)}, {any});
  const Plan plan = g.compile({{3, 7, 3}});
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(plan.output_shapes(), (std::vector<Shape>{{3, 7, 8}, {3, 2}, {3, -1, 3}}));
  const std::vector<Tensor> out = plan.run({uniform({3, 7, 3})});
  for (size_t i = 0; i + 1 < out.size(); ++i) EXPECT_EQ(out[i].shape(), plan.output_shapes()[i]) << i;
  // an input the rule cannot take is refused by it, naming the layer
  nn::Input flat(3, Float32, "flat");
  try {
    seq.reuse_with(flat);
    ADD_FAILURE() << "a (batch, features) input reached an RNN";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(has(e.what(), "RNN 'seq'")) << e.what();
  }
  // the attributes by type
  const auto* a = nn::attributes_of<nn::RNNAttributes>(seq);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->cell, "GRU");
  EXPECT_EQ(a->n_units, 4);
  EXPECT_TRUE(a->bidirectional);
  EXPECT_EQ(nn::attributes_of<nn::CellAttributes>(seq), nullptr);
  EXPECT_EQ(seq.options().to_json(), nn::write_attributes(*a).to_json());
}

TEST(LayerContracts, CellRulesFollowTheBatch) {
  manual_seed(6);
  nn::Input x(3, Float32, "x");
  nn::Input h(8, Float32, "h");
  nn::LSTMCell cell(x, h, 4, {}, "cell");
  nn::Input h1(4, Float32, "h1");
  nn::GRUCell gru(x, h1, 4, {}, "gru");
  EXPECT_EQ(cell.shape(), (Shape{-1, 8}));
  // reuse_with on inputs of a known batch: the output has it
  nn::Input x6(Shape{6, 3}, Float32, "x6");
  nn::Input h6(Shape{6, 8}, Float32, "h6");
  const nn::Layer cell6 = cell.reuse_with({x6, h6});
  EXPECT_EQ(cell6.shape(), (Shape{6, 8}));
  x6.set_value(uniform({6, 3}));
  h6.set_value(uniform({6, 8}));
  EXPECT_EQ(cell6().shape(), (Shape{6, 8}));
  // compile learns the batch from either input
  int calls = 0;
  const Graph g = Graph::build({cell, gru, counting(x, calls)}, {x, h, h1});
  const Plan plan = g.compile(std::vector<Shape>{{5, 3}, {-1, 8}, {5, 4}});
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(plan.output_shapes(), (std::vector<Shape>{{5, 8}, {5, 4}, {5, 3}}));
  const std::vector<Tensor> out = plan.run({uniform({5, 3}), uniform({5, 8}), uniform({5, 4})});
  for (size_t i = 0; i + 1 < out.size(); ++i) EXPECT_EQ(out[i].shape(), plan.output_shapes()[i]) << i;
  // batches that cannot meet are refused, naming the cell
  try {
    (void)g.compile(std::vector<Shape>{{5, 3}, {4, 8}, {5, 4}});
    ADD_FAILURE() << "batches 5 and 4 were combined";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(has(e.what(), "LSTMCell 'cell'")) << e.what();
  }
  const auto* a = nn::attributes_of<nn::CellAttributes>(cell);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->n_units, 4);
  EXPECT_TRUE(a->bias);
  EXPECT_EQ(gru.options().to_json(), nn::write_attributes(*nn::attributes_of<nn::CellAttributes>(gru)).to_json());
}

TEST(LayerContracts, AttentionRulesFollowTheLengths) {
  manual_seed(7);
  nn::ModeScope eval(nn::Mode::Eval);
  nn::Input q(Shape{-1, 4, 8}, Float32, "q");
  nn::Input kv(Shape{-1, 6, 8}, Float32, "kv");
  nn::MultiHeadAttention att(q, kv, kv, 2, {}, std::nullopt, "att");
  nn::TransformerEncoderLayer enc(q, 2, {.ff_units = 16, .dropout = 0.0}, std::nullopt, "enc");
  EXPECT_EQ(att.shape(), (Shape{-1, 4, 8}));
  // reuse_with onto other query and key lengths
  nn::Input q2(Shape{-1, 7, 8}, Float32, "q2");
  nn::Input kv2(Shape{-1, 3, 8}, Float32, "kv2");
  const nn::Layer att2 = att.reuse_with({q2, kv2, kv2});
  const nn::Layer enc2 = enc.reuse_with(q2);
  EXPECT_EQ(att2.shape(), (Shape{-1, 7, 8}));
  EXPECT_EQ(enc2.shape(), (Shape{-1, 7, 8}));
  q2.set_value(uniform({2, 7, 8}));
  kv2.set_value(uniform({2, 3, 8}));
  EXPECT_EQ(att2().shape(), (Shape{2, 7, 8}));
  EXPECT_EQ(enc2().shape(), (Shape{2, 7, 8}));
  // compile: self-attention and an encoder with a padding mask over any length
  int calls = 0;
  nn::Input x(Shape{-1, -1, 8}, Float32, "x");
  nn::Input keep(Shape{-1, -1}, Bool, "keep");
  nn::MultiHeadAttention self(x, x, x, 4, {.causal = true}, keep, "self");
  nn::TransformerEncoderLayer masked(x, 2, {.ff_units = 16, .dropout = 0.0}, keep, "masked");
  const Graph g = Graph::build({self, masked, counting(x, calls)}, {x, keep});
  const Plan plan = g.compile(std::vector<Shape>{{3, 5, 8}, {3, 5}});
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(plan.output_shapes(), (std::vector<Shape>{{3, 5, 8}, {3, 5, 8}, {3, -1, 8}}));
  const std::vector<Tensor> out = plan.run({uniform({3, 5, 8}), full({3, 5}, 1, Bool)});
  for (size_t i = 0; i + 1 < out.size(); ++i) EXPECT_EQ(out[i].shape(), plan.output_shapes()[i]) << i;
  // a mask of another length is refused, naming the layer
  try {
    (void)g.compile(std::vector<Shape>{{3, 5, 8}, {3, 4}});
    ADD_FAILURE() << "a mask of 4 positions reached 5";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(has(e.what(), "MultiHeadAttention 'self'")) << e.what();
  }
  const auto* a = nn::attributes_of<nn::AttentionAttributes>(self);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->n_heads, 4);
  EXPECT_TRUE(a->causal);
  const auto* t = nn::attributes_of<nn::TransformerEncoderAttributes>(enc);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->ff_units, 16);
  EXPECT_EQ(t->activation.name, "relu");
  EXPECT_EQ(enc.options().to_json(), nn::write_attributes(*t).to_json());
}

TEST(LayerContracts, SparseAndPoolingRulesFollowTheSizes) {
  manual_seed(8);
  nn::ModeScope eval(nn::Mode::Eval);
  // DropConnect maps the last axis, its leading sizes the input's
  nn::Input x(Shape{-1, 5, 4}, Float32, "x");
  nn::DropConnect dc(x, 3, 0.5, {.seed = 9}, "dc");
  nn::Input other(Shape{-1, 2, 4}, Float32, "other");
  const nn::Layer dc2 = dc.reuse_with(other);
  EXPECT_EQ(dc2.shape(), (Shape{-1, 2, 3}));
  other.set_value(uniform({6, 2, 4}));
  EXPECT_EQ(dc2().shape(), (Shape{6, 2, 3}));
  // AdaptiveAvgPool2D: (N, C, oh, ow) for any height and width
  nn::Input img(Shape{-1, 2, 7, 5}, Float32, "img");
  nn::AdaptiveAvgPool2D ap(img, {3, 2}, "ap");
  nn::Input big(Shape{-1, 2, 11, 13}, Float32, "big");
  const nn::Layer ap2 = ap.reuse_with(big);
  EXPECT_EQ(ap2.shape(), (Shape{-1, 2, 3, 2}));
  big.set_value(uniform({4, 2, 11, 13}));
  EXPECT_EQ(ap2().shape(), (Shape{4, 2, 3, 2}));
  try {
    ap.reuse_with(x);
    ADD_FAILURE() << "a 3-d input reached AdaptiveAvgPool2D";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(has(e.what(), "AdaptiveAvgPool2D 'ap'")) << e.what();
  }
  // compile for concrete shapes, nothing run
  int calls = 0;
  nn::Input seq(Shape{-1, -1, 4}, Float32, "seq");
  nn::Input any(Shape{-1, 3, -1, -1}, Float32, "any");
  nn::AdaptiveAvgPool2D pooled(any, 2, "pooled");
  const Graph g = Graph::build({dc.reuse_with(seq, "dc3"), pooled, counting(any, calls)}, {seq, any});
  const Plan plan = g.compile(std::vector<Shape>{{2, 7, 4}, {2, 3, 9, 6}});
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(plan.output_shapes(), (std::vector<Shape>{{2, 7, 3}, {2, 3, 2, 2}, {2, 3, -1, -1}}));
  const std::vector<Tensor> out = plan.run({uniform({2, 7, 4}), uniform({2, 3, 9, 6})});
  for (size_t i = 0; i + 1 < out.size(); ++i) EXPECT_EQ(out[i].shape(), plan.output_shapes()[i]) << i;
  // the attributes by type
  const auto* d = nn::attributes_of<nn::DropConnectAttributes>(dc);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->n_units, 3);
  EXPECT_EQ(d->seed, 9u);
  EXPECT_EQ(dc.options().to_json(), nn::write_attributes(*d).to_json());
  ASSERT_NE(nn::attributes_of<nn::AdaptiveAvgPoolAttributes>(ap), nullptr);
  EXPECT_EQ(nn::attributes_of<nn::AdaptiveAvgPoolAttributes>(pooled)->output_size, (std::vector<int64_t>{2, 2}));
  nn::SparseInput bow(5, Float64, "bow");
  ASSERT_NE(nn::attributes_of<nn::SparseInputAttributes>(bow), nullptr);
  EXPECT_EQ(nn::attributes_of<nn::SparseInputAttributes>(bow)->dtype, Float64);
  EXPECT_EQ(bow.options().to_json(), nn::write_attributes(*nn::attributes_of<nn::SparseInputAttributes>(bow)).to_json());
}

TEST(LayerContracts, SourcesKeepTheirDeclaredShapes) {
  nn::Input x(Shape{-1, 3, -1}, Int32, "x");
  const auto* a = nn::attributes_of<nn::InputAttributes>(x);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{-1, 3, -1}));
  EXPECT_EQ(a->dtype, Int32);
  EXPECT_EQ(x.options().to_json(), nn::write_attributes(*a).to_json());
  // read back from options, with the same range checks as before
  const auto back = nn::read_attributes<nn::InputAttributes>(nn::Options::from_json(x.options().to_json()));
  EXPECT_TRUE(nn::same_attributes(*a, back));
  nn::Options bad = x.options();
  bad.set_ints("shape", {-2, 3});
  EXPECT_THROW((void)nn::read_attributes<nn::InputAttributes>(bad), ValueError);
  // sources declare their shapes: the default rule gives them back
  nn::Constant k(uniform({2, 3}), "k");
  nn::Param p(0.5, "p");
  EXPECT_EQ(k.impl()->output_shapes({}), (std::vector<Shape>{{2, 3}}));
  EXPECT_EQ(p.impl()->output_shapes({}), (std::vector<Shape>{Shape{}}));
  EXPECT_EQ(x.impl()->output_shapes({}), (std::vector<Shape>{{-1, 3, -1}}));
  EXPECT_EQ(nn::attributes_of<nn::InputAttributes>(k), nullptr);
}
