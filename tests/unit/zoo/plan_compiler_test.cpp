// The graph compiler (docs/compile.md): compiled plans against a naive reference walker, each
// pass firing (visible in dump()) without changing results, the argument-free call reading Input
// values, shape specialization and its errors, peak bytes against memory_stats.
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>

#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/memory.h>
#include <loom/core/node.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/nn/activation.h>
#include <loom/nn/conv.h>
#include <loom/nn/dropout.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/pooling.h>
#include <loom/nn/state.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/zoo/architectures.h>

#include <memory>
#include <thread>
#include <unordered_map>

#include "unit/common/core_test_util.h"
#include "ops/conv_fused.h"

using namespace loom;

namespace {

// The evaluator before the compiler: each layer's own op on its inputs, recursively, once per node.
std::vector<Tensor> walk(const nn::Layer& handle, std::unordered_map<const nn::LayerImpl*, std::vector<Tensor>>& memo) {
  const nn::Layer l = handle.node();
  if (auto it = memo.find(l.impl().get()); it != memo.end()) return it->second;
  std::vector<Tensor> in;
  const size_t pick = l.impl()->reads_output();
  for (const nn::Layer& i : l.inputs()) in.push_back(walk(i, memo).at(pick));
  std::vector<Tensor> out = l.impl()->n_outputs() > 1 ? l.impl()->compute_outputs(in, nn::current_mode())
                                                      : std::vector<Tensor>{l.impl()->compute(in, nn::current_mode())};
  return memo[l.impl().get()] = out;
}

Tensor reference(const nn::Layer& l) {
  std::unordered_map<const nn::LayerImpl*, std::vector<Tensor>> memo;
  return walk(l, memo)[0];
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(PlanCompiler, EveryZooModelMatchesTheReferenceBitwise) {
  manual_seed(3);
  nn::ModeScope eval(nn::Mode::Eval);
  const std::vector<std::pair<zoo::Network, Tensor>> cases = {
      {zoo::mlp(12, {8, 8}, 3, nn::gelu, 0.3), uniform({2, 12})},
      {zoo::lenet(), uniform({2, 1, 28, 28})},
      {zoo::fashion_cnn(), uniform({2, 1, 28, 28})},
      {zoo::vgg({8, 0, 8, 0}, 5, true, 0.5, 3, 16, "vgg_tiny"), uniform({2, 3, 10, 10})},
      {zoo::resnet({1, 1, 1, 1}, 5, 3, "resnet_tiny"), uniform({2, 3, 32, 32})},
      {zoo::densenet(8, {2, 3}, 16, 2, 0.5, 4, 3, "densenet_tiny"), uniform({2, 3, 32, 32})},
      {zoo::unet(2, 3, 4, 2, true), uniform({1, 2, 8, 12})},
      {zoo::lstm_lm(30, 8, 12, 2, 0.1), randint(0, 30, {2, 5})},
      {zoo::transformer_classifier(40, 6, 16, 2, 32, 2, 3), randint(0, 40, {2, 6})},
  };
  for (const auto& [m, x] : cases) {
    m.input(0).set_value(x);
    const Tensor want = reference(m.output);
    const Plan plan = m.graph.compile();
    const Plan fixed = m.graph.compile({x.shape()});
    EXPECT_TRUE(array_equal(plan(x), want)) << m.name;
    EXPECT_TRUE(array_equal(plan(), want)) << m.name << ": the no-argument call reads the Input's value";
    EXPECT_TRUE(array_equal(fixed(x), want)) << m.name << " compiled for " << shape_str(x.shape());
    EXPECT_TRUE(array_equal(m.output(), want)) << m.name << ": Layer::operator()()";
    EXPECT_TRUE(array_equal(m.output(), want)) << m.name << ": the cached plan, again";
    EXPECT_GT(fixed.peak_bytes(), 0) << m.name;
    EXPECT_EQ(fixed.output_shapes().at(0), want.shape()) << m.name << ": the shape rules agree with the run";
    EXPECT_TRUE(plan.shape_polymorphic()) << m.name;
    EXPECT_FALSE(fixed.shape_polymorphic()) << m.name;
    m.input(0).clear();
  }
}

TEST(PlanCompiler, ModulesMultiOutputModulesAndSharedLayers) {
  manual_seed(4);
  nn::Input in(6, Float32, "in");
  nn::Linear inner(in, 5);
  nn::Activation act(inner, nn::tanh);
  nn::Module block({in}, act, "block");
  nn::Module two({in}, {inner, act}, "two");

  nn::Input x(6, Float32, "x");
  nn::Layer b1 = block(x);
  nn::Layer t = two(x);
  nn::Linear shared(x, 6, {}, "shared");
  nn::Layer shared_again = shared.reuse_with(nn::Activation(x, nn::relu));  // shared state, another input
  nn::Layer out = nn::Add({nn::module_output(t, 0), nn::module_output(t, 1), b1, b1.reuse_with(x), nn::Linear(shared_again, 5)});
  const Tensor xv = uniform({3, 6});
  nn::Input(x.impl()).set_value(xv);
  const Tensor want = reference(out);
  const Graph g = Graph::build({out}, {x});
  EXPECT_TRUE(array_equal(g.compile()(xv), want));
  EXPECT_TRUE(array_equal(g.compile({{3, 6}})(xv), want));
  EXPECT_TRUE(array_equal(g.as_function()({xv})[0], want));
  EXPECT_TRUE(array_equal(out(), want));
  // the multi-output module's inner activations count in the peak (its step is larger than its outputs)
  EXPECT_GT(g.compile({{3, 6}}).peak_bytes(), 0);
}

TEST(PlanCompiler, PlansAreDeterministic) {
  manual_seed(5);
  zoo::Network m = zoo::resnet({1, 1, 1, 1}, 5, 3, "resnet_det");
  nn::ModeScope eval(nn::Mode::Eval);
  const Tensor x = uniform({2, 3, 32, 32});
  const Plan a = m.graph.compile({x.shape()}), b = m.graph.compile({x.shape()});
  EXPECT_EQ(a.dump(), b.dump());
  EXPECT_EQ(a.peak_bytes(), b.peak_bytes());
  EXPECT_TRUE(array_equal(a(x), b(x)));
  EXPECT_TRUE(array_equal(a(x), a(x)));
}

TEST(PlanCompiler, CommonSubexpressionsAreComputedOnce) {
  manual_seed(6);
  nn::Input x(4, Float32, "x");
  nn::Linear d(x, 3, {}, "d");
  nn::Layer d2 = d.reuse_with(x, "d_again");  // the same layer on the same input
  nn::Add sum(d, d2, "sum");
  const Graph g = Graph::build({sum}, {x});
  const Plan plan = g.compile();
  CompileOptions off;
  off.eliminate_common_subexpressions = false;
  const Plan plain = g.compile(off);
  const std::string text = plan.dump();
  EXPECT_TRUE(has(text, "merge  Linear 'd_again' -> Linear 'd'")) << text;
  EXPECT_EQ(count(text, ": Linear"), 1u) << text;
  EXPECT_EQ(count(plain.dump(), ": Linear"), 2u) << plain.dump();
  const Tensor xv = uniform({5, 4});
  nn::Input(x.impl()).set_value(xv);
  EXPECT_TRUE(array_equal(plan(xv), plain(xv)));
  EXPECT_TRUE(array_equal(plan(xv), reference(sum)));

  // not merged: another layer with its own state, and random or state-writing kinds
  nn::Linear other(x, 3, {}, "other");
  nn::Dropout drop(x, 0.5, 1, "drop");
  nn::BatchNorm bn(x, nn::BatchNormOptions{}, "bn");
  nn::Add mix({sum, other, nn::Linear(nn::Add(drop, drop.reuse_with(x, "drop_again")), 3),
               nn::Linear(nn::Add(bn, bn.reuse_with(x, "bn_again")), 3)});
  const std::string mixed = Graph::build({mix}, {x}).compile().dump();
  EXPECT_EQ(count(mixed, "merge "), 1u) << mixed;
  EXPECT_FALSE(has(mixed, "'drop_again' ->")) << mixed;
  EXPECT_FALSE(has(mixed, "'bn_again' ->")) << mixed;
}

TEST(PlanCompiler, ConstantsAreFoldedAndTheirSourcesRemoved) {
  manual_seed(7);
  nn::Input x(Shape{2, 4}, Float32, "x");
  nn::Constant c1(uniform({2, 4}), "c1");
  nn::Constant c2(uniform({2, 4}), "c2");
  nn::Activation folded(nn::Add(c1, c2, "c_sum"), nn::relu, "c_relu");
  nn::Layer out = nn::Multiply({nn::Linear(x, 4, {}, "lin"), folded}, "out");
  const Graph g = Graph::build({out}, {x});
  const Plan plan = g.compile();
  CompileOptions off;
  off.fold_constants = false;
  const Plan plain = g.compile(off);
  const std::string text = plan.dump();
  EXPECT_TRUE(has(text, "fold   Activation 'c_relu' (2, 4)")) << text;
  EXPECT_TRUE(has(text, "dead   Add 'c_sum'")) << text;
  EXPECT_TRUE(has(text, "dead   Constant 'c1'")) << text;
  EXPECT_TRUE(has(text, "dead   Constant 'c2'")) << text;
  EXPECT_FALSE(has(text, ": Activation")) << text;
  EXPECT_TRUE(has(plain.dump(), ": Activation 'c_relu'")) << plain.dump();
  const Tensor xv = uniform({2, 4});
  nn::Input(x.impl()).set_value(xv);
  EXPECT_TRUE(array_equal(plan(xv), plain(xv)));
  EXPECT_TRUE(array_equal(plan(xv), reference(out)));
  // dead-node removal off: the constants' sources stay as steps
  CompileOptions keep;
  keep.remove_dead_nodes = false;
  const std::string kept = g.compile(keep).dump();
  EXPECT_FALSE(has(kept, "dead ")) << kept;
  EXPECT_TRUE(has(kept, ": Constant 'c1'")) << kept;
  EXPECT_TRUE(array_equal(g.compile(keep)(xv), reference(out)));
}

TEST(PlanCompiler, TrainableRandomAndInputDependentNodesAreNotFolded) {
  manual_seed(8);
  nn::Constant c(uniform({3, 4}), "c");
  nn::Linear trained(c, 4, {}, "trained");                 // reads trainable weights
  nn::Dropout drop(c, 0.5, 2, "drop");                     // random in train mode
  nn::Param p(0.5, "p");                                   // a hyperparameter that changes
  nn::Layer out = nn::Add({trained, drop}, "out");
  const Plan plan = Graph::build({out}).compile();
  const std::string text = plan.dump();
  EXPECT_FALSE(has(text, "fold ")) << text;
  nn::ModeScope train(nn::Mode::Train);
  EXPECT_FALSE(array_equal(plan(), plan())) << "dropout draws a new mask per run";
  nn::ModeScope eval(nn::Mode::Eval);
  const Tensor before = plan();
  Tensor w = trained.state().param("weights");
  {
    NoGrad ng;
    w.copy_(w * 2.0);
  }
  EXPECT_FALSE(array_equal(plan(), before)) << "the plan reads the weights as they are now";
  EXPECT_TRUE(array_equal(plan(), reference(out)));
  (void)p;
}

TEST(PlanCompiler, TheArgumentFreeCallReadsInputValues) {
  manual_seed(9);
  nn::Input x(3, Float32, "features");
  nn::Input y(3, Float32, "bias_in");
  nn::Add out(nn::Linear(x, 3), y);
  const Plan plan = Graph::build({out}, {x, y}).compile();
  const std::string missing = error_of([&] { plan(); });
  EXPECT_TRUE(has(missing, "'features'")) << missing;
  EXPECT_THROW(plan(), ValueError);
  const Tensor xv = uniform({2, 3}), yv = uniform({2, 3});
  x.set_value(xv);
  const std::string second = error_of([&] { plan(); });
  EXPECT_TRUE(has(second, "'bias_in'")) << second;
  y.set_value(yv);
  const Tensor got = plan();
  EXPECT_TRUE(array_equal(got, plan(xv, yv)));
  EXPECT_TRUE(array_equal(got, out()));
  // positional inputs override the values
  const Tensor other = uniform({2, 3});
  EXPECT_FALSE(array_equal(plan(other, yv), got));
  EXPECT_TRUE(array_equal(plan(), got));
  // a value set later is read by the cached Layer::operator()() plan
  x.set_value(other);
  EXPECT_TRUE(array_equal(out(), plan(other, yv)));
  // wrong count, shape and dtype name the input
  EXPECT_THROW(plan(xv), ValueError);
  const std::string shape = error_of([&] { plan(uniform({2, 4}), yv); });
  EXPECT_TRUE(has(shape, "'features'")) << shape;
  EXPECT_THROW(plan(uniform({2, 4}), yv), ShapeError);
  EXPECT_THROW(plan(xv, ones({2, 3}, Float64)), DTypeError);
  // a graph input that is not an Input layer holds no value
  nn::Linear mid(x, 3, {}, "mid");
  nn::Activation top(mid, nn::relu);
  const Plan from_mid = Graph::build({top}, {mid}).compile();
  const std::string not_input = error_of([&] { from_mid(); });
  EXPECT_TRUE(has(not_input, "'mid'")) << not_input;
}

TEST(PlanCompiler, LayerCallReleasesItsGraph) {
  std::weak_ptr<nn::LayerImpl> gone;
  {
    nn::Input x(2, Float32, "x");
    nn::Linear l(x, 2);
    x.set_value(uniform({1, 2}));
    EXPECT_EQ(l().shape(), (Shape{1, 2}));
    gone = l.impl();
  }
  EXPECT_TRUE(gone.expired()) << "the plan cached in a layer must not keep that layer alive";
}

TEST(PlanCompiler, InputShapesSpecializeAndCheckTheGraph) {
  manual_seed(10);
  nn::Input x(8, Float32, "x");
  nn::Input y(4, Float32, "y");
  nn::Linear h(x, 4, {}, "h");
  nn::Add out(h, y, "joined");
  const Graph g = Graph::build({out}, {x, y});
  const Plan plan = g.compile({{32, 8}, {32, 4}});
  EXPECT_FALSE(plan.shape_polymorphic());
  EXPECT_EQ(plan.input_shapes()[0], (Shape{32, 8}));
  const std::string text = plan.dump();
  EXPECT_TRUE(has(text, ": Linear 'h' (32, 4)")) << text;
  EXPECT_TRUE(has(text, ": Add 'joined' (32, 4)")) << text;
  EXPECT_TRUE(has(g.compile().dump(), ": Linear 'h' (-1, 4)"));
  EXPECT_TRUE(has(g.compile().dump(), "polymorphic"));
  const Tensor xv = uniform({32, 8}), yv = uniform({32, 4});
  EXPECT_TRUE(array_equal(plan(xv, yv), g.compile()(xv, yv)));
  // another batch: the specialized plan refuses, naming the input; the polymorphic one runs
  const std::string batch = error_of([&] { plan(uniform({16, 8}), uniform({16, 4})); });
  EXPECT_TRUE(has(batch, "'x'") && has(batch, "(32, 8)")) << batch;
  EXPECT_EQ(g.compile()(uniform({16, 8}), uniform({16, 4})).shape(), (Shape{16, 4}));
  // compile-time errors name the input or the node
  const std::string rank = error_of([&] { g.compile({{32, 8, 1}, {32, 4}}); });
  EXPECT_TRUE(has(rank, "Input 'x'")) << rank;
  EXPECT_THROW(g.compile({{32, 7}, {32, 4}}), ShapeError);
  EXPECT_THROW(g.compile({{32, 8}}), ValueError);
  const std::string mixed = error_of([&] { g.compile({{32, 8}, {16, 4}}); });
  EXPECT_TRUE(has(mixed, "Add 'joined'") && has(mixed, "32") && has(mixed, "16")) << mixed;
  EXPECT_THROW(g.compile({{32, 8}, {16, 4}}), ShapeError);
  // a batch of 1 broadcasts
  EXPECT_NO_THROW(g.compile({{32, 8}, {1, 4}}));
  // sizes besides the batch come from the kinds' shape rules; their errors name the node
  nn::Input image(Shape{-1, 1, -1, -1}, Float32, "image");
  nn::Conv2D conv(image, 2, {5, 5}, {}, "conv5");
  nn::GlobalPool pooled(conv);
  const Graph cg = Graph::build({pooled}, {image});
  EXPECT_TRUE(has(cg.compile({{2, 1, 9, 8}}).dump(), ": Conv2D 'conv5' (2, 2, 5, 4)")) << cg.compile({{2, 1, 9, 8}}).dump();
  EXPECT_GT(cg.compile({{2, 1, 9, 8}}).peak_bytes(), 0);
  EXPECT_EQ(cg.compile({{2, 1, -1, 8}}).peak_bytes(), -1);
  const std::string small = error_of([&] { cg.compile({{2, 1, 3, 3}}); });
  EXPECT_TRUE(has(small, "Conv2D 'conv5'")) << small;
  // -1 keeps a dimension open
  EXPECT_TRUE(g.compile({{-1, 8}, {-1, 4}}).shape_polymorphic());
  EXPECT_EQ(g.compile({{-1, 8}, {-1, 4}}).peak_bytes(), -1);
}

// Shapes for given input sizes come from the kinds' shape rules (LayerImpl::output_shapes):
// nothing runs at compile time. A kind without a rule (a Lambda) keeps its declared sizes, its
// leading -1 taking the batch, and its other -1 sizes stay open until it runs.
TEST(PlanCompiler, SpecializedShapesComeFromTheKindsRulesWithoutRunning) {
  manual_seed(15);
  zoo::Network net = zoo::resnet({1, 1, 1, 1}, 5, 3, "resnet_rules");
  const Plan p2 = net.graph.compile({{2, 3, 20, 24}}), p6 = net.graph.compile({{6, 3, 20, 24}});
  std::string at2 = p2.dump(), at6 = p6.dump();
  for (size_t at = at2.find("(2, "); at != std::string::npos; at = at2.find("(2, ", at + 1)) at2.replace(at, 4, "(6, ");
  // the lines that state the peak (the peak memory pass's and the summary's) scale with the batch
  auto without_peak = [](const std::string& t) {
    std::string out, line;
    for (size_t at = 0; at < t.size(); at += line.size() + 1) {
      line = t.substr(at, t.find('\n', at) - at);
      if (line.find("peak") == std::string::npos) out += line + "\n";
    }
    return out;
  };
  EXPECT_EQ(without_peak(at6), without_peak(at2));
  EXPECT_EQ(p6.peak_bytes(), 3 * p2.peak_bytes());  // activations only: every one scales with the batch
  EXPECT_TRUE(has(at6, ": Conv2D 'layer2.0.conv1' (6, 128, 3, 3)")) << at6;  // a spatial size by the rules
  EXPECT_EQ(p6.output_shapes(), (std::vector<Shape>{{6, 5}}));
  nn::ModeScope eval(nn::Mode::Eval);
  const Tensor x = uniform({6, 3, 20, 24});
  EXPECT_TRUE(array_equal(net.graph.compile({x.shape()})(x), net.graph.compile()(x)));

  // a Lambda is not called by compile; its open non-batch size stays open, and the run sizes it
  int calls = 0;
  nn::Input v(4, Float32, "v");
  nn::Lambda gram({v}, [&](const std::vector<Tensor>& a) { ++calls; return matmul(a[0], a[0].T()); }, Shape{-1, -1},
                  Float32, "gram");
  const Plan gp = Graph::build({gram}, {v}).compile({{7, 4}});
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(has(gp.dump(), ": Lambda 'gram' (7, -1)")) << gp.dump();
  EXPECT_EQ(gp.peak_bytes(), -1);
  EXPECT_EQ(gp(uniform({7, 4})).shape(), (Shape{7, 7}));
  EXPECT_EQ(calls, 1);
  // a Lambda's real error comes from its run, naming nothing the compiler invented
  nn::Lambda bad({v}, [](const std::vector<Tensor>& a) { return a[0].reshape({3, -1}); }, Shape{-1, -1}, Float32, "bad");
  const Plan bp = Graph::build({bad}, {v}).compile({{5, 4}});
  EXPECT_THROW(bp(uniform({5, 4})), ShapeError);
}

TEST(PlanCompiler, PeakBytesAgreeWithMemoryStats) {
  manual_seed(11);
  set_num_threads(1);
  nn::LinearOptions no_bias;
  no_bias.bias = false;
  nn::Input x(64, Float32, "x");
  nn::Linear l1(x, 256, no_bias);
  nn::Activation a1(l1, nn::relu);
  nn::Linear l2(a1, 128, no_bias);
  nn::Activation a2(l2, nn::tanh);
  nn::Linear l3(a2, 16, no_bias);
  const Plan plan = Graph::build({l3}, {x}).compile({{32, 64}});
  // the peak is while a1 runs: x, l1 and a1 (the input stays live: its owner holds it)
  const int64_t f = 4;
  EXPECT_EQ(plan.peak_bytes(), f * (32 * 64 + 32 * 256 + 32 * 256)) << plan.dump();
  EXPECT_TRUE(has(plan.dump(), "peak: " + std::to_string(plan.peak_bytes()) + " bytes")) << plan.dump();
  const Tensor xv = uniform({32, 64});
  NoGrad no_grad;  // autograd would keep activations for backward
  (void)plan(xv);  // warm up: kernels' one-time buffers
  const MemoryStats before = memory_stats();
  reset_peak_memory();
  Tensor y = plan(xv);
  const MemoryStats after = memory_stats();
  // what the run allocated at its peak, plus the input allocated before it. These GEMMs and
  // activations allocate nothing but their results, so the two agree exactly; a Linear with a
  // bias would add one temporary of its output's size (matmul, then + bias) that the plan,
  // which counts activations only, does not see.
  EXPECT_EQ(after.peak_bytes - before.current_bytes + f * 32 * 64, plan.peak_bytes());
}

// Inference runs plan their memory: the first runs as usual, the second records its blocks,
// later ones take every block made and freed within the run from one buffer. Outputs are not
// planned (they outlive the run), so a result held across later runs keeps its values.
TEST(PlanCompiler, InferenceRunsTakeTheirBlocksFromTheMemoryPlan) {
  manual_seed(12);
  loom_test::ThreadsScope threads(2);
  nn::Input x(64, Float32, "x");
  nn::Linear l1(x, 256);
  nn::Activation a1(l1, nn::relu);
  nn::Linear l2(a1, 128);
  nn::Activation a2(l2, nn::tanh);
  nn::Linear l3(a2, 16);
  const Plan plan = Graph::build({l3}, {x}).compile({{32, 64}});
  const Tensor x1 = uniform({32, 64}), x2 = uniform({32, 64}) * 3.0;
  NoGrad no_grad;
  const Tensor want1 = plan(x1), want2 = plan(x2).copy();  // runs 1 and 2: as usual, then recorded
  StepArena::Stats st = plan.memory_plan();
  EXPECT_EQ(st.scopes, 2);
  EXPECT_EQ(st.recordings, 1);
  EXPECT_GT(st.planned_blocks, 0);
  EXPECT_GE(st.reserved_bytes, st.recorded_peak_bytes);
  EXPECT_GT(st.recorded_peak_bytes, 0);
  EXPECT_TRUE(has(plan.dump(), "memory plan (inference runs): " + std::to_string(st.planned_blocks) + " blocks")) << plan.dump();
  const Tensor y1 = plan(x1);
  st = plan.memory_plan();
  EXPECT_GT(st.served, 0);
  EXPECT_EQ(st.missed, 0);
  EXPECT_TRUE(array_equal(y1, want1));
  EXPECT_TRUE(array_equal(plan(x2), want2));  // warms the cache for the output and the comparison
  const MemoryStats before = memory_stats();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(array_equal(plan(x2), want2));
  EXPECT_EQ(memory_stats().system_allocations, before.system_allocations);  // nothing new after the first runs
  EXPECT_TRUE(array_equal(y1, want1));  // held across four runs that reused the buffer
  EXPECT_GT(memory_stats().arena_bytes, 0);

  // another batch size misses the plan (and is still right), twice in a row re-records it
  const Tensor x3 = uniform({5, 64});
  const Plan eager_shape = Graph::build({l3}, {x}).compile();  // a fresh plan: no arena yet
  const Tensor want3 = eager_shape(x3);
  const Plan open = Graph::build({l3}, {x}).compile();
  for (int i = 0; i < 3; ++i) (void)open(x1);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(array_equal(open(x3), want3));
  EXPECT_GT(open.memory_plan().missed, 0);
  EXPECT_EQ(open.memory_plan().recordings, 1);
  EXPECT_TRUE(array_equal(open(x3), want3));  // recorded again for the new shape
  EXPECT_EQ(open.memory_plan().recordings, 2);
  EXPECT_TRUE(array_equal(open(x3), want3));
  EXPECT_EQ(open.memory_plan().missed, 0);
}

// With gradients recorded, or inside another scope (a training step plans its own), a plan's
// runs leave its arena alone; two threads running one plan at once both get right results.
TEST(PlanCompiler, MemoryPlanStaysOutOfTrainingAndConcurrentRuns) {
  manual_seed(13);
  nn::Input x(8, Float32, "x");
  nn::Linear l1(x, 32);
  nn::Activation a1(l1, nn::relu);
  nn::Linear l2(a1, 4);
  const Plan plan = Graph::build({l2}, {x}).compile();
  const Tensor xv = uniform({16, 8});
  for (int i = 0; i < 3; ++i) (void)plan(xv).sum().item<float>();
  EXPECT_EQ(plan.memory_plan().scopes, 0);  // gradients on
  Tensor want;
  {
    NoGrad no_grad;
    want = plan(xv);
    StepArena outer;
    StepArena::Scope scope(outer);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(array_equal(plan(xv), want));
  }
  EXPECT_EQ(plan.memory_plan().scopes, 1);  // only the run before the outer scope opened
  EXPECT_THROW(
      {
        StepArena a;
        StepArena::Scope first(a);
        StepArena::Scope second(a);
      },
      ValueError);
  StepArena a;
  {
    StepArena::Scope first(a);
    StepArena::Scope second(a, StepArena::if_free);
    EXPECT_TRUE(first.owns());
    EXPECT_FALSE(second.owns());
  }
  EXPECT_EQ(a.stats().scopes, 1);

  loom_test::ThreadsScope threads(1);
  std::vector<int> wrong(2, 0);
  std::vector<std::thread> runners;
  for (int t = 0; t < 2; ++t)
    runners.emplace_back([&, t] {
      NoGrad no_grad;
      for (int i = 0; i < 200; ++i) wrong[static_cast<size_t>(t)] += !array_equal(plan(xv), want);
    });
  for (auto& r : runners) r.join();
  EXPECT_EQ(wrong, std::vector<int>({0, 0}));
  EXPECT_GT(plan.memory_plan().scopes, 100);
}

// The ResNet path (fused convolutions, blocked layouts, Winograd scratch, pooling) runs on the
// memory plan with the same bits as before it.
TEST(PlanCompiler, ResNetInferenceRunsOnTheMemoryPlanWithTheSameBits) {
  manual_seed(14);
  zoo::Network net = zoo::resnet({1, 1, 1, 1}, 5, 3, "resnet_arena");
  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad no_grad;
  const Tensor x = uniform({2, 3, 32, 32});
  const Plan plan = net.graph.compile({x.shape()});
  const Tensor first = plan(x);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(array_equal(plan(x), first));
  const StepArena::Stats st = plan.memory_plan();
  EXPECT_GT(st.planned_blocks, 10) << plan.dump();
  EXPECT_GT(st.served, 10);
  EXPECT_EQ(st.missed, 0);
}

// Inference epilogues: in Eval mode without gradients, Conv2D -> BatchNorm -> [Add] -> ReLU runs
// as one convolution (batch norm folded, post-ops); the dump names each group; results stay
// within float32 rounding of the unfused plan; Train mode and gradient-enabled runs are unchanged.
TEST(PlanCompiler, ConvEpiloguesAreFusedInEvalMode) {
  manual_seed(5);
  zoo::Network net = zoo::resnet({1, 1, 1, 1}, 5, 3, "resnet_fuse");
  const Graph& g = net.graph;
  // running statistics that are not the defaults, so that folding them matters
  {
    nn::ModeScope train(nn::Mode::Train);
    NoGrad no_grad;
    for (int i = 0; i < 3; ++i) g.compile()(uniform({4, 3, 32, 32}) * 2.0 + 0.5);
  }
  const Plan fused = g.compile();
  const Plan plain = g.compile(CompileOptions{.fuse_conv_epilogues = false, .fuse_elementwise = false});
  const std::string dump = fused.dump();
  EXPECT_GE(count(dump, "fuse   Conv2D"), 8u) << dump;  // stem, and two per basic block at least
  EXPECT_TRUE(has(dump, "(residual '")) << dump;
  EXPECT_FALSE(has(plain.dump(), "fuse   ")) << plain.dump();
  const Tensor x = uniform({2, 3, 32, 32});
  nn::ModeScope eval(nn::Mode::Eval);
  {
    NoGrad no_grad;
    const Tensor a = fused(x), b = plain(x);
    const double scale = max(abs(b)).item<double>();
    EXPECT_LE(max(abs(a - b)).item<double>(), 1e-4 * (1.0 + scale));
    EXPECT_FALSE(array_equal(a, b)) << "the fused path did not run (bitwise the unfused result)";
  }
  // with gradients the group runs the unfused ops: bitwise the plain plan's
  EXPECT_TRUE(array_equal(fused(x), plain(x)));
  nn::ModeScope train(nn::Mode::Train);
  NoGrad no_grad;
  EXPECT_TRUE(array_equal(fused(x), plain(x)));
}

// Blocked layouts: in Eval mode without gradients a fused convolution's output read only by
// fused convolutions stays in oneDNN's blocked layout. A small ResNet-like graph: stem, a basic
// block with an identity residual, a strided block with a 1x1 downsample residual, then a
// block output that is a graph output and one that a non-convolution step also reads (both
// plain). The dump names the blocked values; counts show that the blocked path ran (and the one
// reorder, of the residual 'f_bn' for the plain output 'f'); values within the fused tolerance of
// the unfused plan, at batch 1 and 3 and 1 and 2 threads; gradients and Train mode unchanged.
TEST(PlanCompiler, BlockedLayoutsBetweenFusedConvs) {
  manual_seed(11);
  nn::Input x(Shape{-1, 3, 12, 12}, Float32, "x");
  auto unit = [](const nn::Layer& in, int64_t filters, int64_t k, int64_t stride, const std::string& name,
                 const nn::Layer* residual, bool relu) {
    nn::Conv2D c(in, filters, k, {.stride = stride, .padding = k / 2, .bias = false}, name + "_conv");
    nn::Layer y = nn::BatchNorm(c, {}, name + "_bn");
    if (residual) y = nn::Add(y, *residual, name + "_add");
    return relu ? nn::Layer(nn::Activation(y, nn::relu, name)) : y;
  };
  const nn::Layer a = unit(x, 16, 3, 1, "a", nullptr, true);   // stem
  const nn::Layer b = unit(a, 16, 3, 1, "b", nullptr, true);
  const nn::Layer c = unit(b, 16, 3, 1, "c", &a, true);       // identity residual a
  const nn::Layer d = unit(c, 32, 3, 2, "d", nullptr, true);
  const nn::Layer e = unit(c, 32, 1, 2, "e", nullptr, false);  // downsample
  const nn::Layer f = unit(d, 32, 3, 1, "f", &e, true);       // a graph output
  const nn::Layer h = unit(f, 32, 3, 1, "h", nullptr, true);   // also read by a sigmoid
  const nn::Layer i = unit(h, 32, 3, 1, "i", nullptr, true);
  nn::Activation s(h, nn::sigmoid, "s");
  const Graph g = Graph::build({f, i, s}, {x});
  {
    nn::ModeScope train(nn::Mode::Train);
    NoGrad no_grad;
    for (int k = 0; k < 3; ++k) g.compile().run({uniform({4, 3, 12, 12}) * 2.0 + 0.5});
  }
  const Plan blocked = g.compile();
  const Plan fused = g.compile(CompileOptions{.blocked_layouts = false});
  const Plan plain = g.compile(CompileOptions{.fuse_conv_epilogues = false});
  const std::string dump = blocked.dump();
  // the Add of f fuses into e's convolution (computed after f_bn): f_bn is e's residual
  for (const char* v : {"Activation 'a'", "Activation 'b'", "Activation 'c'", "Activation 'd'", "BatchNorm 'f_bn'"})
    EXPECT_TRUE(has(dump, std::string("block  ") + v + " stays in the convolutions' blocked layout")) << v << "\n" << dump;
  EXPECT_EQ(count(dump, "block  "), 5u) << dump;  // not f (an output), h (read by s), i (an output)
  EXPECT_TRUE(has(dump, "block  Activation 'a' stays in the convolutions' blocked layout (read only by fused Conv2D 'b_conv', "
                        "Conv2D 'c_conv')"))
      << dump;
  EXPECT_TRUE(has(dump, "'c' stays blocked)")) << dump;
  EXPECT_FALSE(has(fused.dump(), "block  ")) << fused.dump();
  int64_t block = 0;
  {
    loom_test::ThreadsScope one(1);  // at one thread any batch may be blocked, NHWC (block 1) included
    block = detail::conv2d_fused_blocked(zeros({1, 16, 4, 4}), zeros({16, 16, 1, 1}), 1, 0, 1, 1);
  }
  nn::ModeScope eval(nn::Mode::Eval);
  for (int64_t batch : {1, 3})
    for (int threads : {1, 2}) {
      loom_test::ThreadsScope ts(threads);
      const std::string what = "batch " + std::to_string(batch) + " threads " + std::to_string(threads);
      const Tensor in = uniform({batch, 3, 12, 12}, -1, 1);
      NoGrad no_grad;
      const detail::BlockedStats before = detail::blocked_stats();
      const std::vector<Tensor> got = blocked.run({in});
      const detail::BlockedStats after = detail::blocked_stats();
      const std::vector<Tensor> want = plain.run({in}), unblocked = fused.run({in});
      EXPECT_EQ(detail::blocked_stats().fused_calls, after.fused_calls) << what;  // the other plans: none blocked
      if (block > 0 && !(block == 1 && batch < threads && batch != 1)) {  // NHWC: one sample's rows split
        // the convolutions of a, b, c, d, f_bn and f read or write blocked; h reads f (an output)
        EXPECT_EQ(after.fused_calls - before.fused_calls, 6) << what;
        EXPECT_EQ(after.reorders - before.reorders, 1) << what;
      } else {
        EXPECT_EQ(after.fused_calls - before.fused_calls, 0) << what;  // every value NCHW
        EXPECT_EQ(after.reorders - before.reorders, 0) << what;
      }
      for (size_t k = 0; k < want.size(); ++k) {
        const double scale = max(abs(want[k])).item<double>();
        EXPECT_LE(max(abs(got[k] - want[k])).item<double>(), 1e-4 * (1.0 + scale)) << what << " output " << k;
        EXPECT_LE(max(abs(got[k] - unblocked[k])).item<double>(), 1e-5 * (1.0 + scale)) << what << " output " << k;
      }
      EXPECT_TRUE(array_equal(blocked.run({in})[1], got[1])) << what << ": not deterministic";
    }
  loom_test::ThreadsScope ts(1);
  const Tensor in = uniform({2, 3, 12, 12}, -1, 1);
  const detail::BlockedStats before = detail::blocked_stats();
  // with gradients the groups run the unfused ops (bitwise the plain plan), and in Train mode
  const std::vector<Tensor> with_grad = blocked.run({in}), plain_grad = plain.run({in});
  for (size_t k = 0; k < with_grad.size(); ++k) EXPECT_TRUE(array_equal(with_grad[k], plain_grad[k])) << k;
  {
    nn::ModeScope train(nn::Mode::Train);
    NoGrad no_grad;
    EXPECT_TRUE(array_equal(blocked.run({in})[1], plain.run({in})[1]));
  }
  EXPECT_EQ(detail::blocked_stats().fused_calls, before.fused_calls);
  EXPECT_EQ(detail::blocked_stats().reorders, before.reorders);
}

// In place (Eval, no gradients): a fused convolution is given its residual only when no later
// step reads it, and then writes into the residual's buffer unless something else (the caller's
// input) holds it; the values are the unfused plan's either way, and the input is not touched.
// The unfused plan chains add2 -> out, which reads r1 at out's step: r1 must live until then
// (it was freed at s's step, before, and the plan failed).
TEST(PlanCompiler, FusedConvWritesIntoADeadResidualOnly) {
  manual_seed(12);
  nn::Input x(Shape{-1, 8, 6, 6}, Float32, "x");
  nn::Conv2D c0(x, 8, 3, {.padding = 1}, "c0");
  nn::Add add0(c0, x, "add0");  // residual: the graph input (the caller holds it)
  nn::Activation a(add0, nn::relu, "a");
  nn::Conv2D c1(a, 8, 3, {.padding = 1}, "c1");
  nn::Add add1(c1, a, "add1");  // a is read by nothing after: written into
  nn::Activation r1(add1, nn::relu, "r1");
  nn::Conv2D c2(r1, 8, 3, {.padding = 1}, "c2");
  nn::Add add2(c2, r1, "add2");            // r1 is read again below: not given
  nn::Activation s(r1, nn::sigmoid, "s");  // a step after c2's
  nn::Layer out = nn::Add(nn::Layer(add2), nn::Layer(s), "out");
  const Graph g = Graph::build({out}, {x});
  const Plan fused = g.compile();
  const Plan plain = g.compile(CompileOptions{.fuse_conv_epilogues = false});
  const std::string dump = fused.dump();
  EXPECT_TRUE(has(dump, "may write into the buffer of its residual 'x'")) << dump;
  EXPECT_TRUE(has(dump, "may write into the buffer of its residual 'a'")) << dump;
  EXPECT_FALSE(has(dump, "may write into the buffer of its residual 'r1'")) << dump;
  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad no_grad;
  for (int threads : {1, 2})
    for (int64_t batch : {1, 3}) {
      loom_test::ThreadsScope ts(threads);
      const Tensor in = uniform({batch, 8, 6, 6}, -1, 1), kept = in.copy();
      const Tensor got = fused.run({in})[0], want = plain.run({in})[0];
      EXPECT_TRUE(array_equal(in, kept)) << "the caller's input was written";
      EXPECT_LE(max(abs(got - want)).item<double>(), 1e-5 * (1.0 + max(abs(want)).item<double>()))
          << "batch " << batch << " threads " << threads;
      EXPECT_TRUE(array_equal(fused.run({in})[0], got)) << "not deterministic";
    }
}

// A MaxPool2D between fused convolutions (as after ResNet's stem: conv, BN, ReLU, pool, then a
// block that reads the pool as input and residual) pools in the blocked layout: no conversion
// around it, the unfused plan's values, at one and several samples and threads.
TEST(PlanCompiler, MaxPoolBetweenFusedConvsStaysBlocked) {
  manual_seed(13);
  nn::Input x(Shape{-1, 8, 16, 16}, Float32, "x");
  nn::Conv2D stem(x, 16, 3, {.padding = 1, .bias = false}, "stem");
  nn::Activation a(nn::BatchNorm(stem, {}, "stem_bn"), nn::relu, "a");
  nn::MaxPool2D pool(a, 3, {.stride = 2, .padding = 1}, "pool");
  nn::Conv2D c1(pool, 16, 3, {.padding = 1}, "c1");
  nn::Activation r1(nn::Add(c1, pool, "add1"), nn::relu, "r1");
  nn::Layer out = nn::GlobalPool(r1, nn::GlobalPool::Mode::Avg, "gap");
  const Graph g = Graph::build({out}, {x});
  const Plan blocked = g.compile(), plain = g.compile(CompileOptions{.fuse_conv_epilogues = false});
  const std::string dump = blocked.dump();
  EXPECT_TRUE(has(dump, "block  MaxPool2D 'pool' pools in the convolutions' blocked layout")) << dump;
  EXPECT_TRUE(has(dump, "block  Activation 'a' stays in the convolutions' blocked layout")) << dump;
  int64_t block = 0;
  {
    loom_test::ThreadsScope one(1);
    block = detail::conv2d_fused_blocked(zeros({1, 16, 4, 4}), zeros({16, 16, 1, 1}), 1, 0, 1, 1);
    // an image of 3 channels may write blocked (into NHWC the image is read as NHWC)
    const int64_t from_image = detail::conv2d_fused_blocked(zeros({1, 3, 8, 8}), zeros({16, 3, 3, 3}), 1, 1, 1, 1);
    EXPECT_EQ(from_image, block);
  }
  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad no_grad;
  for (int threads : {1, 2})
    for (int64_t batch : {1, 3}) {
      loom_test::ThreadsScope ts(threads);
      const Tensor in = uniform({batch, 8, 16, 16}, -1, 1);
      const detail::BlockedStats before = detail::blocked_stats();
      const Tensor got = blocked.run({in})[0];
      const detail::BlockedStats after = detail::blocked_stats();
      const Tensor want = plain.run({in})[0];
      const std::string what = "batch " + std::to_string(batch) + " threads " + std::to_string(threads);
      // blocked wherever the stem's output may be (NHWC with fewer samples than threads: one sample)
      const bool expect = block > 0 && !(block == 1 && batch < threads && batch != 1);
      EXPECT_EQ(after.pools - before.pools, expect ? 1 : 0) << what;
      if (expect) EXPECT_EQ(after.reorders - before.reorders, 1) << what;  // r1 back to NCHW for the average
      EXPECT_LE(max(abs(got - want)).item<double>(), 1e-5 * (1.0 + max(abs(want)).item<double>())) << what;
    }
}

// A conv whose output is also read elsewhere, or is a graph output, is not fused.
TEST(PlanCompiler, ConvEpilogueNeedsSoleReaders) {
  nn::Input x(Shape{-1, 3, 8, 8}, Float32, "x");
  nn::Conv2D c(x, 4, 3, {.padding = 1}, "c");
  nn::BatchNorm bn(c, {}, "bn");
  nn::Activation r(bn, nn::relu, "r");
  nn::Add both({r, c}, "both");  // c is read twice
  const std::string dump = Graph::build({both}, {x}).compile().dump();
  EXPECT_FALSE(has(dump, "fuse   Conv2D 'c'")) << dump;
  const std::string dump2 = Graph::build({c, r}, {x}).compile().dump();  // c is an output
  EXPECT_FALSE(has(dump2, "fuse   ")) << dump2;
  // bn an output: the group ends there (its value is the fused convolution's), ReLU runs alone
  const std::string dump3 = Graph::build({bn, r}, {x}).compile().dump();
  EXPECT_TRUE(has(dump3, "fuse   Conv2D 'c' + BatchNorm 'bn' (Eval")) << dump3;
}

// Elementwise chains run as one pass, bit for bit the ops one by one (the same vector kernels),
// with gradients too (one recorded node, its gradients bit for bit the links'); for operands the
// pass cannot take (broadcast, strided) the ops run one by one; the dump names each chain.
TEST(PlanCompiler, ElementwiseChainsRunAsOnePass) {
  nn::Input a(Shape{-1, 300}, Float32, "a"), b(Shape{-1, 300}, Float32, "b"), c(Shape{-1, 300}, Float32, "c");
  nn::Multiply ab(a, b, "ab");
  nn::Add abc(ab, c, "abc");
  nn::Activation r(abc, nn::relu, "r");
  nn::Subtract d(c, r, "d");               // the chain's value as the second operand
  nn::Activation s(d, nn::sigmoid, "s");
  nn::Multiply sq(s, s, "sq");             // s read twice: the chain ends at s
  const Graph g = Graph::build({sq}, {a, b, c});
  const Plan fused = g.compile();
  const Plan plain = g.compile(CompileOptions{.fuse_elementwise = false});
  const std::string dump = fused.dump();
  EXPECT_TRUE(has(dump, "fuse   Multiply 'ab' -> Add 'abc' -> Activation 'r' -> Subtract 'd' -> Activation 's'")) << dump;
  EXPECT_FALSE(has(plain.dump(), "fuse   ")) << plain.dump();
  // 7 x 300 = 2100 elements: more than one block of the kernel, and a partial one
  manual_seed(3);
  const Tensor x = normal({7, 300}), y = normal({7, 300}), z = normal({7, 300});
  Tensor expected;
  {
    NoGrad no_grad;
    const Tensor want = sigmoid(z - relu(x * y + z));
    expected = want * want;
    EXPECT_TRUE(array_equal(fused(x, y, z), expected));
    EXPECT_TRUE(array_equal(plain(x, y, z), expected));
    // the chain allocates its output only: 2 allocations (s, sq) against 6 op by op
    const int64_t before = memory_stats().allocations;
    (void)fused(x, y, z);
    const int64_t fused_allocs = memory_stats().allocations - before;
    (void)plain(x, y, z);
    EXPECT_EQ(fused_allocs, 2);
    EXPECT_EQ(memory_stats().allocations - before - fused_allocs, 6);
    // a broadcast operand and a strided one: the ops one by one, same values
    const Tensor row = normal({1, 300});
    const Tensor want_row = sigmoid(row - relu(x * y + row));
    EXPECT_TRUE(array_equal(fused(x, y, row), want_row * want_row));
    const Tensor strided = normal({300, 7}).T();
    ASSERT_FALSE(strided.is_contiguous());
    const Tensor want_t = sigmoid(z - relu(strided * y + z));
    EXPECT_TRUE(array_equal(fused(strided, y, z), want_t * want_t));
  }
  // with gradients: the same one pass, recorded as one node whose backward applies the links'
  // rules (their intermediates are recomputed, never stored): the values and every input's
  // gradient bit for bit the plain plan's, link by link; an input that needs none gets none
  const Tensor xg = x.copy().requires_grad_(), xp = x.copy().requires_grad_();
  const Tensor zg = z.copy().requires_grad_(), zp = z.copy().requires_grad_();
  const int64_t before = memory_stats().allocations;
  Tensor out = fused(xg, y, zg);
  EXPECT_EQ(memory_stats().allocations - before, 2) << "the chain's output and sq's, as without gradients";
  ASSERT_TRUE(out.grad_fn());
  ASSERT_TRUE(out.grad_fn()->next.at(0));
  EXPECT_EQ(std::string(out.grad_fn()->next[0]->name()), "elementwise_chain");  // sq's input: the chain, one node
  EXPECT_TRUE(array_equal(out, expected));
  sum(out).backward();
  sum(plain(xp, y, zp)).backward();
  ASSERT_TRUE(xg.grad().defined());
  EXPECT_TRUE(array_equal(xg.grad(), xp.grad()));
  EXPECT_TRUE(array_equal(zg.grad(), zp.grad()));  // z is read twice in the chain: its two contributions summed
  // each input's gradient through the chain alone, against the links one by one (y's too)
  const Tensor yg = y.copy().requires_grad_(), yp = y.copy().requires_grad_();
  const Tensor seed = normal({7, 300});
  const std::vector<Tensor> gf = grad(fused.run({x, yg, z})[0], {yg}, seed);
  const std::vector<Tensor> gp = grad(plain.run({x, yp, z})[0], {yp}, seed);
  EXPECT_TRUE(array_equal(gf[0], gp[0]));
  // a strided operand with gradients: the node reads it link by link, the same gradient
  const Tensor strided = normal({300, 7}).T().requires_grad_(), strided_p = strided.detach().requires_grad_();
  sum(fused(strided, y, z)).backward();
  sum(plain(strided_p, y, z)).backward();
  EXPECT_TRUE(array_equal(strided.grad(), strided_p.grad()));
}

// A link that is a graph output, or read by two layers, ends the chain; a lone op is no chain.
TEST(PlanCompiler, ElementwiseChainsNeedSoleReaders) {
  nn::Input a(Shape{-1, 8}, Float32, "a"), b(Shape{-1, 8}, Float32, "b");
  nn::Add s(a, b, "s");
  nn::Activation t(s, nn::tanh, "t");
  const std::string out_dump = Graph::build({s, t}, {a, b}).compile().dump();  // s is an output
  EXPECT_FALSE(has(out_dump, "fuse   ")) << out_dump;
  nn::Multiply m(s, t, "m");  // s read by t and m
  const std::string two = Graph::build({m}, {a, b}).compile().dump();
  EXPECT_TRUE(has(two, "fuse   Activation 't' -> Multiply 'm'")) << two;
  EXPECT_FALSE(has(two, "Add 's' ->")) << two;
  const Plan p = Graph::build({m}, {a, b}).compile();
  const Tensor x = uniform({3, 8}), y = uniform({3, 8});
  NoGrad no_grad;
  EXPECT_TRUE(array_equal(p(x, y), (x + y) * tanh(x + y)));
  nn::Input e(Shape{-1, 8}, Float32, "e");
  nn::Activation lone(e, nn::relu, "lone");
  EXPECT_FALSE(has(Graph::build({lone}, {e}).compile().dump(), "fuse   "));
  // an operand whose compiled shape differs (a broadcast row) keeps its op out of a chain
  nn::Input row(Shape{1, 8}, Float32, "row");
  nn::Activation rr(nn::Add(a, row, "plus_row"), nn::relu, "rr");
  const std::string bdump = Graph::build({rr}, {a, row}).compile({{5, 8}, {1, 8}}).dump();
  EXPECT_FALSE(has(bdump, "fuse   Add 'plus_row'")) << bdump;
}
