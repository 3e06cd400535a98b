// The Keras-style layer API: layers made without input and bound by their first call,
// nn::Sequential, Lambdas with declared tensors, Modules with several outputs, and
// `std::cout << shape`.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/shape_io.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/graph/serialize.h>
#include <loom/io/model_file.h>
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
#include <loom/nn/options.h>
#include <loom/nn/pooling.h>
#include <loom/nn/registry.h>
#include <loom/nn/shape.h>
#include <loom/nn/state.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/optimizers.h>

#include <sstream>

#include "unit/common/core_test_util.h"
#include "unit/nn/lambda_kind_util.h"

using namespace loom;
using loom_test::affine;
using loom_test::contains_all;
using loom_test::register_affine;
using loom_test::error_message;
using loom_test::same_bytes;
using loom_test::TempDir;

namespace {

Graph round_trip(const Graph& g, const std::string& file) {
  TempDir tmp;
  const std::string path = (tmp.dir / file).string();
  io::save_model(path, g);
  return io::load_model(path);
}

bool same_outputs(const Graph& a, const Graph& b, const std::vector<Tensor>& xs) {
  nn::ModeScope eval(nn::Mode::Eval);
  const auto ya = a.compile().run(xs), yb = b.compile().run(xs);
  if (ya.size() != yb.size()) return false;
  for (size_t i = 0; i < ya.size(); ++i)
    if (!same_bytes(ya[i], yb[i])) return false;
  return true;
}

}  // namespace

// ---------------------------------------------------------------- layers made without input
TEST(UnboundLayers, FirstCallBuildsLaterCallsShare) {
  manual_seed(0);
  nn::Linear dense(8, {}, "dense");
  EXPECT_FALSE(dense.bound());
  EXPECT_EQ(std::string(dense.kind()), "Linear");
  EXPECT_EQ(dense.name(), "dense");
  nn::Input x(4, Float32, "x"), y(4, Float32, "y");
  nn::Layer h = dense(x);
  EXPECT_TRUE(dense.bound());
  EXPECT_EQ(h.name(), "dense");
  EXPECT_EQ(h.shape(), (Shape{-1, 8}));
  EXPECT_EQ(dense.node(), h);  // the handle stands for the layer its first call built
  EXPECT_EQ(dense.shape(), h.shape());
  EXPECT_EQ(dense.state().param("weights").shape(), (Shape{4, 8}));  // shaped by x
  nn::Layer h2 = dense(y);
  EXPECT_NE(h2, h);
  EXPECT_EQ(h2.state().param("weights").impl(), h.state().param("weights").impl());
  // a template used as another layer's input, or as an output, is the layer it built
  nn::Activation act(dense, nn::relu, "act");
  Graph g = Graph::build({nn::Add(act, h2, "sum")}, {x, y});
  EXPECT_EQ(g.nodes().size(), 6u);  // x, dense, act, y, dense's reuse, sum
  EXPECT_EQ(g.parameters().size(), 2u);
  Tensor a = randn({2, 4}), b = randn({2, 4});
  const Tensor w = h.state().param("weights"), bias = h.state().param("bias");
  Tensor want = relu(matmul(a, w) + bias) + (matmul(b, w) + bias);
  EXPECT_TRUE(allclose(g.compile().run({a, b})[0], want));
  EXPECT_EQ(Graph::build({dense}, {x}).nodes().size(), 2u);
}

TEST(UnboundLayers, CommonKindsBindFromTheirInput) {
  manual_seed(1);
  nn::Input img(Shape{-1, 3, 8, 8}, Float32, "img");
  nn::Layer h = nn::Conv2D(4, 3, {.padding = 1})(img);
  EXPECT_EQ(h.shape(), (Shape{-1, 4, 8, 8}));
  EXPECT_EQ(h.state().param("weights").shape(), (Shape{4, 3, 3, 3}));
  h = nn::BatchNorm()(h);
  EXPECT_EQ(std::string(h.kind()), "BatchNorm");
  h = nn::MaxPool2D(2)(h);
  EXPECT_EQ(h.shape(), (Shape{-1, 4, 4, 4}));
  nn::Layer p = nn::AvgPool2D(2)(h);
  EXPECT_EQ(p.shape(), (Shape{-1, 4, 2, 2}));
  nn::Layer gp = nn::GlobalPool(nn::GlobalPool::Mode::Max)(h);
  EXPECT_EQ(gp.shape(), (Shape{-1, 4}));
  h = nn::Flatten()(h);
  EXPECT_EQ(h.shape(), (Shape{-1, 64}));
  h = nn::Reshape({4, 16})(h);
  EXPECT_EQ(h.shape(), (Shape{-1, 4, 16}));
  h = nn::LayerNorm()(h);
  EXPECT_EQ(h.state().param("weight").shape(), (Shape{16}));
  h = nn::Dropout(0.5)(h);
  h = nn::Activation(nn::tanh)(h);
  nn::Input seq(Shape{-1, 2, 9}, Float32, "seq");
  EXPECT_EQ(nn::Conv1D(3, 3)(seq).shape(), (Shape{-1, 3, 7}));
  // what they build is what the constructors with input build: a saved graph loads
  Graph g = Graph::build({h, gp, p}, {img});
  Graph back = round_trip(g, "unbound.safetensors");
  EXPECT_TRUE(same_outputs(g, back, {randn({2, 3, 8, 8})}));
}

TEST(UnboundLayers, UnboundUseIsAClearError) {
  nn::Linear dense(8, {}, "dense");
  for (auto f : std::vector<std::function<void()>>{[&] { dense.shape(); }, [&] { dense.state(); }, [&] { dense.parameters(); },
                                                   [&] { dense.reuse_with(nn::Input(4)); }}) {
    EXPECT_TRUE(contains_all(error_message<ValueError>(f), {"Linear 'dense'", "made without an input", "dense(x)"}));
  }
  nn::Input x(4, Float32, "x");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { Graph::build({dense}, {x}); }), {"'dense'", "not been called"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::Linear(x, 3, {}, "out")(std::vector<nn::Layer>{x, x}); }),
                           {"'out'", "reuse_with got 2 inputs"}));
  // a wrong first call leaves the layer unbound, with the kind's own message naming it
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { dense(std::vector<nn::Layer>{x, x}); }), {"Linear 'dense'", "1 input"}));
  EXPECT_FALSE(dense.bound());
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { dense(dense); }), {"Linear 'dense'", "called on itself"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { nn::Linear(0); }), {"n_units must be positive"}));
  std::ostringstream os;
  os << dense;
  EXPECT_EQ(os.str(), "Linear 'dense' (not called yet)");
}

TEST(UnboundLayers, AnyRegisteredKindFromItsOptions) {
  nn::Layer ln = nn::unbound_layer("LayerNorm", nn::Options().set_float("eps", 0.5), "ln");
  nn::Input x(6, Float32, "x");
  nn::Layer y = ln(x);
  EXPECT_EQ(y.options().get_float("eps"), 0.5);
  EXPECT_EQ(y.shape(), (Shape{-1, 6}));
  nn::Layer bad = nn::unbound_layer("LayerNorm", nn::Options(), "ln2");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { bad(x); }), {"LayerNorm 'ln2'", "'eps'"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::unbound_layer("Nope", nn::Options(), "n")(x); }), {"unknown kind 'Nope'"}));
}

// ---------------------------------------------------------------- Sequential
TEST(SequentialLayer, AppliesStepsInOrderAndShares) {
  manual_seed(2);
  nn::Sequential mlp({nn::Linear(8, {}, "fc1"), nn::Activation(nn::relu, "relu"),
                      [](const nn::Layer& h) { return nn::Linear(h, 3, {}, "fc2"); }},
                     "mlp");
  nn::Input x(4, Float32, "x"), x2(4, Float32, "x2");
  nn::Layer y = mlp(x);
  EXPECT_EQ(std::string(y.kind()), "Sequential");
  EXPECT_EQ(y.name(), "mlp");
  EXPECT_EQ(y.shape(), (Shape{-1, 3}));
  const Graph* inner = nn::module_graph(y);
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->nodes().size(), 4u);  // the inner Input, fc1, relu, fc2
  EXPECT_EQ(inner->layer("fc1").state().param("weights").shape(), (Shape{4, 8}));
  Graph g = Graph::build({y}, {x});
  ASSERT_EQ(g.parameters().size(), 4u);
  Tensor a = randn({2, 4});
  const Graph& in = *inner;
  Tensor want = matmul(relu(matmul(a, in.layer("fc1").state().param("weights")) + in.layer("fc1").state().param("bias")),
                       in.layer("fc2").state().param("weights")) +
                in.layer("fc2").state().param("bias");
  EXPECT_TRUE(allclose(g.compile()(a), want));
  // a second call shares every weight
  nn::Layer y2 = mlp(x2);
  Graph g2 = Graph::build({y, y2}, {x, x2});
  EXPECT_EQ(g2.parameters().size(), 4u);
  EXPECT_TRUE(same_bytes(g2.compile().run({a, a})[1], g.compile()(a)));
  // the bound form, nested in a graph of other layers
  nn::Input z(4, Float32, "z");
  nn::Sequential block(z, {nn::Linear(4), nn::Activation(nn::tanh)}, "block");
  EXPECT_EQ(block.shape(), (Shape{-1, 4}));
  EXPECT_EQ(Graph::build({nn::Linear(block, 2, {}, "head")}, {z}).parameters().size(), 4u);
}

TEST(SequentialLayer, SummaryListsInnerLayersAndSaveLoads) {
  manual_seed(3);
  nn::Input x(4, Float32, "x");
  nn::Sequential body({nn::Linear(8, {}, "fc1"), nn::Activation(nn::relu, "relu"), nn::Dropout(0.2, 5, "drop")}, "body");
  nn::Layer y = nn::Linear(body(x), 2, {}, "out");
  Graph g = Graph::build({y}, {x});
  const std::string s = g.summary();
  EXPECT_NE(s.find("body    Sequential  (-1, 8)           40\n"
                   "  fc1   Linear      (-1, 8)           40\n"
                   "  relu  Activation  (-1, 8)            0\n"
                   "  drop  Dropout     (-1, 8)            0\n"
                   "out     Linear      (-1, 2)           18\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("Total params: 58\n"), std::string::npos) << s;  // inner rows count once, in body's
  Graph back = round_trip(g, "seq.safetensors");
  EXPECT_EQ(std::string(back.layer("body").kind()), "Sequential");
  EXPECT_EQ(back.summary(), s);
  EXPECT_TRUE(same_outputs(g, back, {randn({3, 4})}));
}

TEST(SequentialLayer, BadStepsAreNamed) {
  nn::Input x(4, Float32, "x");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::Sequential({nn::Step()}, "s")(x); }), {"Sequential 's'", "step 0", "empty"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::Sequential({[](const nn::Layer&) { return nn::Layer(); }}, "s2")(x); }),
                           {"Sequential 's2'", "step 0", "undefined"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::Sequential({nn::Linear(3)}, "s3").state(); }),
                           {"Sequential 's3'", "not been called"}));
}

// ---------------------------------------------------------------- Lambda with declared tensors
TEST(LambdaState, DeclaredTensorsAreParametersTrainedAndSaved) {
  register_affine();
  nn::Input x(3, Float32, "x");
  nn::Lambda f({x}, affine, x.shape(), {.params = {{"w", full({3}, 2.0f)}}, .buffers = {{"b", full({3}, 1.0f)}}}, "Affine", Float32, "f");
  Graph g = Graph::build({f}, {x});
  ASSERT_EQ(g.parameters().size(), 1u);
  EXPECT_TRUE(g.parameters()[0].requires_grad());
  EXPECT_EQ(f.state().all_buffers().size(), 1u);
  // trained: a step of SGD moves w
  train::SGD opt(g.parameters(), train::SGDOptions{.lr = 0.1});
  Tensor a = ones({2, 3});
  Tensor loss = sum(g.compile()(a));
  loss.backward();
  opt.step();
  EXPECT_TRUE(allclose(f.state().param("w"), full({3}, 2.0f - 0.1f * 2)));
  // reuse_with shares them
  nn::Input x2(3, Float32, "x2");
  EXPECT_EQ(f.reuse_with(x2).state().param("w").impl(), f.state().param("w").impl());
  // saved and loaded with its values
  f.state().buffer("b").copy_(full({3}, -4.0f));
  Graph back = round_trip(g, "lambda.safetensors");
  EXPECT_EQ(std::string(back.layer("f").kind()), "Affine");
  EXPECT_TRUE(same_bytes(back.layer("f").state().param("w"), f.state().param("w")));
  EXPECT_TRUE(same_bytes(back.layer("f").state().buffer("b"), f.state().buffer("b")));
  EXPECT_TRUE(same_outputs(g, back, {randn({2, 3})}));
}

TEST(LambdaState, UnregisteredKindsAndPlainLambdasAreRefused) {
  nn::Input x(3, Float32, "x");
  auto fn = [](const std::vector<Tensor>& in, nn::State& s) { return in[0] * s.param("w"); };
  nn::Lambda plain({x}, fn, x.shape(), {.params = {{"w", ones({3})}}}, "Lambda", Float32, "plain");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_to_json(Graph::build({plain}, {x})); }),
                           {"'plain'", "Lambda", "register_lambda_kind"}));
  nn::Lambda mine({x}, fn, x.shape(), {.params = {{"w", ones({3})}}}, "NotYetRegistered", Float32, "mine");
  Graph g = Graph::build({mine}, {x});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_to_json(g); }), {"layer 'mine'", "'NotYetRegistered'", "not registered"}));
  // a file with a kind this process has not registered names the layer and the way out
  register_affine();
  nn::Lambda f({x}, affine, x.shape(), {.params = {{"w", ones({3})}}, .buffers = {{"b", ones({3})}}}, "Affine", Float32, "f");
  std::string json = graph_to_json(Graph::build({f}, {x}));
  json.replace(json.find("\"Affine\""), 8, "\"Affine9\"");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(json); }),
                           {"layer 'f'", "unknown kind 'Affine9'", "register_lambda_kind"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { nn::register_lambda_kind("Affine", affine); }), {"'Affine'", "already registered"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { nn::register_lambda_kind("Lambda", affine); }), {"\"Lambda\""}));
}

// ---------------------------------------------------------------- Modules with several outputs
TEST(MultiOutputModule, OutputsAreLayers) {
  manual_seed(4);
  nn::Input in(4, Float32, "in");
  nn::Linear trunk(in, 6, {}, "trunk");
  nn::Module heads({in}, {nn::Linear(trunk, 2, {}, "cls"), nn::Linear(trunk, 1, {}, "reg")}, "heads");
  EXPECT_EQ(heads.n_outputs(), 2u);
  nn::Input x(4, Float32, "x");
  nn::Layer m = heads.reuse_with(x, "m");
  nn::Layer cls = nn::module_output(m, 0, "cls_out"), reg = nn::module_output(m, 1, "reg_out");
  EXPECT_EQ(cls.shape(), (Shape{-1, 2}));
  EXPECT_EQ(reg.shape(), (Shape{-1, 1}));
  EXPECT_EQ(heads[1].shape(), (Shape{-1, 1}));
  Graph g = Graph::build({cls, reg}, {x});
  EXPECT_EQ(g.parameters().size(), 6u);
  Tensor a = randn({3, 4});
  const auto y = g.compile().run({a});
  const auto direct = heads.graph().compile().run({a});
  EXPECT_TRUE(same_bytes(y[0], direct[0]));
  EXPECT_TRUE(same_bytes(y[1], direct[1]));
  // Layer::operator() agrees with the plan
  x.set_value(a);
  EXPECT_TRUE(same_bytes(reg(), direct[1]));
  x.clear();
  // summary: the module's row shows both shapes, then its inner layers
  const std::string s = g.summary();
  EXPECT_NE(s.find("(-1, 2), (-1, 1)"), std::string::npos) << s;
  EXPECT_NE(s.find("  trunk"), std::string::npos) << s;
  EXPECT_NE(s.find("reg_out"), std::string::npos) << s;
  // saved and loaded
  Graph back = round_trip(g, "heads.safetensors");
  EXPECT_EQ(std::string(back.layer("reg_out").kind()), "ModuleOutput");
  EXPECT_TRUE(same_outputs(g, back, {a}));
  // errors
  EXPECT_TRUE(contains_all(error_message<IndexError>([&] { heads.output(2); }), {"'heads'", "2 outputs", "index 2"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::module_output(trunk, 0); }), {"'trunk'", "several outputs"}));
}

// ---------------------------------------------------------------- Shape printing
namespace user_code {
struct Thing {};
std::ostream& operator<<(std::ostream& os, const Thing&) { return os << "thing"; }  // hides loom's
std::string print(const Shape& s) {
  using loom::operator<<;
  std::ostringstream os;
  os << s << " " << Thing{};
  return os.str();
}
}  // namespace user_code

TEST(ShapePrinting, StreamOperator) {
  std::ostringstream os;
  nn::Input x(Shape{-1, 3, 4}, Float32, "x");
  os << x.shape() << " " << Shape{5} << " " << Shape{};  // found through `using namespace loom;`
  EXPECT_EQ(os.str(), "(-1, 3, 4) (5,) ()");
  EXPECT_EQ(user_code::print({2, 3}), "(2, 3) thing");
}
