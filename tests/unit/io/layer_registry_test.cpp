// The layer-kind registry (nn/registry.h): every registered kind, built-in or user-defined,
// survives save_model / load_model with identical outputs, parameters and buffers; the
// registry's own errors; and the "Writing a layer" recipe of docs/layers.md.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/graph/serialize.h>
#include <loom/io/model_file.h>
#include <loom/nn/activation.h>
#include <loom/nn/attention.h>
#include <loom/nn/conv.h>
#include <loom/nn/decoder_block.h>
#include <loom/nn/dropout.h>
#include <loom/nn/embedding.h>
#include <loom/nn/feed_forward.h>
#include <loom/nn/init.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/options.h>
#include <loom/nn/pooling.h>
#include <loom/nn/recurrent.h>
#include <loom/nn/registry.h>
#include <loom/nn/shape.h>
#include <loom/nn/sparse.h>
#include <loom/nn/state.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/sparse.h>

#include <cmath>
#include <functional>
#include <map>
#include <mutex>

#include "unit/common/core_test_util.h"
#include "unit/nn/lambda_kind_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::same_bytes;
using loom_test::TempDir;

namespace {

// ---- the user-defined kind of docs/layers.md, "Writing a layer" (kept identical to it)
struct ScaleImpl final : nn::LayerBase<ScaleImpl> {
  double offset = 0;
  const char* kind() const override { return "Scale"; }
  Tensor compute(const std::vector<Tensor>& in, nn::Mode) override { return in[0] * state->param("scale") + offset; }
  nn::Options options() const override { return nn::Options().set_float("offset", offset); }
};

class Scale : public nn::Layer {
 public:
  Scale(const nn::Layer& input, double offset = 0, const std::string& name = "") {
    if (!input.defined() || input.n_units() <= 0) throw ValueError("Scale: the input layer must have known units");
    auto impl = std::make_shared<ScaleImpl>();
    impl->offset = offset;
    impl->inputs = {input};
    impl->shape = input.shape();
    impl->dtype = input.dtype();
    impl->name = nn::unique_name("scale", name);
    impl->state->add_param("scale", randn({input.n_units()}, input.dtype()).requires_grad_());
    static_cast<nn::Layer&>(*this) = nn::Layer(impl);
  }
};

void register_scale() {
  static std::once_flag once;  // the registry is per process; tests share it
  std::call_once(once, [] {
    nn::register_layer_kind("Scale", [](const nn::LayerSpec& s) -> nn::Layer {
      return Scale(s.input(), s.options.get_float("offset"), s.name);
    });
  });
}

// A kind that is never registered.
struct UnregisteredImpl final : nn::LayerBase<UnregisteredImpl> {
  const char* kind() const override { return "NotRegistered"; }
  Tensor compute(const std::vector<Tensor>& in, nn::Mode) override { return in[0]; }
};

struct Case {
  Graph graph;
  std::vector<Tensor> inputs;
  // Sets values that are not positional inputs (a SparseInput's) on a graph and its loaded copy.
  std::function<void(const Graph&)> feed;
};

Tensor data(const Shape& s) { return randn(s); }
Tensor ids(const Shape& s, int64_t n) { return randint(0, n, s); }

// One small graph per kind: each uses the kind with non-default options where it has any.
std::map<std::string, std::function<Case()>> cases() {
  using namespace nn;
  std::map<std::string, std::function<Case()>> c;
  c["Input"] = [] {
    Input x(Shape{-1, 3}, Float64, "x");
    return Case{Graph::build({Activation(x, nn::tanh, "act")}), {randn({2, 3}, Float64)}};
  };
  c["Constant"] = [] {
    Input x(4, Float32, "x");
    return Case{Graph::build({Add(x, Constant(from_vector<float>({1.5f, -2, 0.25f, 3}, {4}), "c"), "sum")}, {x}), {data({2, 4})}};
  };
  c["Param"] = [] {
    Input x(4, Float32, "x");
    return Case{Graph::build({Multiply(x, Param(0.75, "p"), "prod")}, {x}), {data({2, 4})}};
  };
  c["Linear"] = [] {
    Input x(4, Float32, "x");
    Linear a(x, 6, {.bias_init = Init::uniform(-1, 1)}, "a");
    Linear tied(a, 4, {.bias = false, .shared_weights = a.state().param("weights"), .transpose_weights = true}, "tied");
    return Case{Graph::build({tied}, {x}), {data({3, 4})}};
  };
  c["Activation"] = [] {
    Input x(4, Float32, "x");
    return Case{Graph::build({Activation(x, nn::gelu, "act")}, {x}), {data({2, 4})}};
  };
  c["Dropout"] = [] {
    Input x(4, Float32, "x");
    return Case{Graph::build({Linear(Dropout(x, 0.3, 11, "drop"), 2, {}, "out")}, {x}), {data({2, 4})}};
  };
  c["Add"] = [] {
    Input x(4, Float32, "x"), y(4, Float32, "y");
    return Case{Graph::build({Add(x, y, "sum")}, {x, y}), {data({2, 4}), data({2, 4})}};
  };
  c["Subtract"] = [] {
    Input x(4, Float32, "x"), y(4, Float32, "y");
    return Case{Graph::build({Subtract(x, y, "diff")}, {x, y}), {data({2, 4}), data({2, 4})}};
  };
  c["Multiply"] = [] {
    Input x(4, Float32, "x"), y(4, Float32, "y");
    return Case{Graph::build({Multiply(x, y, "prod")}, {x, y}), {data({2, 4}), data({2, 4})}};
  };
  c["Mean"] = [] {
    Input x(4, Float32, "x"), y(4, Float32, "y");
    return Case{Graph::build({Mean({x, y}, "mean")}, {x, y}), {data({2, 4}), data({2, 4})}};
  };
  c["Concat"] = [] {
    Input x(Shape{-1, 2, 3}, Float32, "x"), y(Shape{-1, 4, 3}, Float32, "y");
    return Case{Graph::build({Concat({x, y}, 1, "cat")}, {x, y}), {data({2, 2, 3}), data({2, 4, 3})}};
  };
  c["Reshape"] = [] {
    Input x(Shape{-1, 2, 6}, Float32, "x");
    return Case{Graph::build({Reshape(x, {3, -1}, "r")}, {x}), {data({2, 2, 6})}};
  };
  c["Transpose"] = [] {
    Input x(Shape{-1, 2, 5}, Float32, "x");
    return Case{Graph::build({Transpose(x, {1, 0}, "t")}, {x}), {data({2, 2, 5})}};
  };
  c["Flip"] = [] {
    Input x(Shape{-1, 2, 3, 5}, Float32, "x");
    return Case{Graph::build({Flip(x, {2, 0}, "f")}, {x}), {data({2, 2, 3, 5})}};
  };
  c["RMSNorm"] = [] {
    Input x(Shape{-1, 3, 6}, Float32, "x");
    return Case{Graph::build({RMSNorm(x, 1e-5, "rms")}, {x}), {data({2, 3, 6})}};
  };
  c["SwiGLU"] = [] {
    Input x(Shape{-1, 3, 6}, Float32, "x");
    return Case{Graph::build({SwiGLU(x, 10, Init::glorot_uniform(), "mlp")}, {x}), {data({2, 3, 6})}};
  };
  c["AxisSlice"] = [] {
    Input x(Shape{-1, 6, 5}, Float32, "x");
    return Case{Graph::build({AxisSlice(x, 1, -4, 5, 2, "s")}, {x}), {data({2, 6, 5})}};
  };
  c["Residual"] = [] {
    Input x(4, Float32, "x");
    return Case{Graph::build({Residual(x, Linear(x, 6, {}, "block"), "res")}, {x}), {data({2, 4})}};
  };
  c["Gate"] = [] {
    Input x(4, Float32, "x"), g(3, Float32, "g");
    return Case{Graph::build({Gate(x, g, "gate")}, {x, g}), {data({2, 4}), data({2, 3})}};
  };
  c["OneHot"] = [] {
    Input x(Shape{-1, 3}, Int64, "ids");
    return Case{Graph::build({OneHot(x, 5, Float64, "oh")}, {x}), {ids({2, 3}, 5)}};
  };
  c["Lookup"] = [] {
    Input x(Shape{-1, 3}, Int64, "ids");
    return Case{Graph::build({Lookup(x, 7, 4, {.padding_id = 0, .init = Init::uniform(-1, 1)}, "emb")}, {x}), {ids({2, 3}, 7)}};
  };
  c["PositionEmbedding"] = [] {
    Input x(Shape{-1, -1}, Int64, "ids");
    const Layer pos = PositionEmbedding(x, 6, 4, Init::uniform(-1, 1), "wpe");
    return Case{Graph::build({Add(Lookup(x, 7, 4, {}, "wte"), pos, "embed")}, {x}), {ids({2, 5}, 7)}};
  };
  c["Conv1D"] = [] {
    Input x(Shape{-1, 2, 9}, Float32, "x");
    return Case{Graph::build({Conv1D(x, 3, 3, {.stride = 2, .padding = 1, .dilation = 1, .bias = false}, "conv")}, {x}), {data({2, 2, 9})}};
  };
  c["Conv2D"] = [] {
    Input x(Shape{-1, 2, 6, 6}, Float32, "x");
    return Case{Graph::build({Conv2D(x, 4, 3, {.padding = "same", .groups = 2}, "conv")}, {x}), {data({2, 2, 6, 6})}};
  };
  c["Conv2DTranspose"] = [] {
    Input x(Shape{-1, 2, 4, 4}, Float32, "x");
    return Case{Graph::build({Conv2DTranspose(x, 3, 3, {.stride = 2, .padding = 1, .output_padding = 1}, "deconv")}, {x}),
                {data({2, 2, 4, 4})}};
  };
  c["MaxPool2D"] = [] {
    Input x(Shape{-1, 2, 7, 7}, Float32, "x");
    return Case{Graph::build({MaxPool2D(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true}, "pool")}, {x}), {data({2, 2, 7, 7})}};
  };
  c["AvgPool2D"] = [] {
    Input x(Shape{-1, 2, 6, 6}, Float32, "x");
    return Case{Graph::build({AvgPool2D(x, 2, {}, "pool")}, {x}), {data({2, 2, 6, 6})}};
  };
  c["GlobalPool"] = [] {
    Input x(Shape{-1, 2, 5, 5}, Float32, "x");
    return Case{Graph::build({GlobalPool(x, GlobalPool::Mode::Max, "gp")}, {x}), {data({2, 2, 5, 5})}};
  };
  c["AdaptiveAvgPool2D"] = [] {
    Input x(Shape{-1, 2, 7, 5}, Float32, "x");
    return Case{Graph::build({AdaptiveAvgPool2D(x, {3, 2}, "ap")}, {x}), {data({2, 2, 7, 5})}};
  };
  c["BatchNorm"] = [] {
    Input x(Shape{-1, 3, 4, 4}, Float32, "x");
    BatchNorm bn(x, {.momentum = 0.2, .eps = 1e-3}, "bn");
    ModeScope train(Mode::Train);  // moves the running averages away from their initial values
    x.set_value(data({4, 3, 4, 4}));
    bn();
    x.clear();
    return Case{Graph::build({bn}, {x}), {data({2, 3, 4, 4})}};
  };
  c["LayerNorm"] = [] {
    Input x(4, Float32, "x");
    return Case{Graph::build({LayerNorm(x, 1e-3, "ln")}, {x}), {data({2, 4})}};
  };
  c["RNNCell"] = [] {
    Input x(3, Float32, "x"), h(4, Float32, "h");
    return Case{Graph::build({RNNCell(x, h, 4, {.activation = nn::relu, .bias = false}, "cell")}, {x, h}), {data({2, 3}), data({2, 4})}};
  };
  c["LSTMCell"] = [] {
    Input x(3, Float32, "x"), h(8, Float32, "hc");
    return Case{Graph::build({LSTMCell(x, h, 4, {}, "cell")}, {x, h}), {data({2, 3}), data({2, 8})}};
  };
  c["GRUCell"] = [] {
    Input x(3, Float32, "x"), h(4, Float32, "h");
    return Case{Graph::build({GRUCell(x, h, 4, {}, "cell")}, {x, h}), {data({2, 3}), data({2, 4})}};
  };
  c["RNN"] = [] {
    Input x(Shape{-1, 5, 3}, Float32, "x");
    RNNOptions o;
    o.cell = CellKind::GRU;
    o.bidirectional = true;
    o.return_sequences = false;
    return Case{Graph::build({RNN(x, 4, o, "rnn")}, {x}), {data({2, 5, 3})}};
  };
  c["MultiHeadAttention"] = [] {
    Input q(Shape{-1, 3, 8}, Float32, "q"), kv(Shape{-1, 4, 8}, Float32, "kv");
    // grouped-query (2 query heads on 1 key / value head: (8, 4) key and value weights), with
    // dropout on the weights (training only): both attributes go through the file
    // and a rotary embedding with Llama 3's scaling
    const RotaryOptions rope{.base = 5e5, .llama3_factor = 8, .original_max_positions = 16};
    return Case{Graph::build({MultiHeadAttention(q, kv, kv, 2, {.causal = false, .bias = false, .n_kv_heads = 1, .dropout = 0.25, .rotary = rope},
                                                 std::nullopt, "mha")},
                             {q, kv}),
                {data({2, 3, 8}), data({2, 4, 8})}};
  };
  c["TransformerEncoderLayer"] = [] {
    Input x(Shape{-1, 3, 8}, Float32, "x");
    TransformerOptions o;
    o.ff_units = 16;
    o.norm_first = true;
    o.causal = true;
    return Case{Graph::build({TransformerEncoderLayer(x, 2, o, std::nullopt, "enc")}, {x}), {data({2, 3, 8})}};
  };
  c["GptBlock"] = [] {
    Input x(Shape{-1, 5, 8}, Float32, "x"), keep(Shape{-1, 5}, Bool, "keep");
    return Case{Graph::build({GptBlock(x, 2, {.ff_units = 12, .eps = 1e-6, .activation = nn::gelu}, keep, "block")}, {x, keep}),
                {data({2, 5, 8}), greater(uniform({2, 5}), scalar_tensor(0.3))}};
  };
  c["LlamaBlock"] = [] {
    Input x(Shape{-1, 5, 8}, Float32, "x");
    const RotaryOptions rope{.base = 5e5, .llama3_factor = 8, .original_max_positions = 4};
    return Case{Graph::build({LlamaBlock(x, 4, {.ff_units = 12, .n_kv_heads = 2, .eps = 1e-5, .rotary = rope, .attention_bias = true}, std::nullopt,
                                         "block")},
                             {x}),
                {data({2, 5, 8})}};
  };
  c["Module"] = [] {
    Input in(4, Float32, "in");
    Module block({in}, Activation(Linear(in, 4, {}, "inner"), nn::relu, "inner_act"), "block");
    Input x(4, Float32, "x");
    Layer first = block.reuse_with(x, "first");
    Layer second = block.reuse_with(first, "second");  // the same weights twice
    return Case{Graph::build({second}, {x}), {data({2, 4})}};
  };
  c["Sequential"] = [] {
    Input x(4, Float32, "x");
    Sequential body({Linear(4, {}, "fc"), Activation(nn::relu, "relu"), Dropout(0.2, 3, "drop")}, "body");
    Layer once = body(x);
    return Case{Graph::build({body(once)}, {x}), {data({2, 4})}};  // the same weights twice
  };
  c["ModuleOutput"] = [] {
    Input in(4, Float32, "in");
    Linear trunk(in, 5, {}, "trunk");
    Module heads({in}, {Linear(trunk, 2, {}, "a"), Activation(trunk, nn::tanh, "b")}, "heads");
    Input x(4, Float32, "x");
    Layer m = heads.reuse_with(x, "m");
    return Case{Graph::build({module_output(m, 1, "out1"), module_output(m, 0, "out0")}, {x}), {data({3, 4})}};
  };
  c["Affine"] = [] {
    Input x(3, Float32, "x");
    Lambda f({x}, loom_test::affine, x.shape(), {.params = {{"w", randn({3})}}, .buffers = {{"b", randn({3})}}}, "Affine", Float32, "f");
    return Case{Graph::build({f}, {x}), {data({2, 3})}};
  };
  c["SparseInput"] = [] {
    nn::SparseInput x(5, Float64, "bow");
    Graph g = Graph::build({Linear(x, 3, {}, "lin")});
    const SparseTensor v = SparseTensor::from_dense(randn({2, 5}, Float64) * (randn({2, 5}, Float64) > 0.0));
    return Case{g, {}, [v](const Graph& g) { nn::SparseInput(g.layer("bow").impl()).set_value(v); }};
  };
  c["DropConnect"] = [] {
    Input x(4, Float32, "x");
    DropConnectOptions o{.bias = false, .weight_init = Init::uniform(-1, 1), .seed = 17};
    return Case{Graph::build({DropConnect(x, 3, 0.25, o, "dc")}, {x}), {data({2, 4})}};
  };
  c["Scale"] = [] {
    Input x(4, Float32, "x");
    return Case{Graph::build({Scale(x, 0.5, "scale")}, {x}), {data({2, 4})}};
  };
  return c;
}

bool graph_has_kind(const Graph& g, const std::string& kind) {
  for (const nn::Layer& l : g.nodes())
    if (l.kind() == kind) return true;
  return false;
}

std::vector<Tensor> buffers(const Graph& g) {
  std::vector<Tensor> out;
  for (const nn::Layer& l : g.nodes())
    for (const auto& [name, t] : l.state().all_buffers()) out.push_back(t);
  return out;
}

}  // namespace

TEST(LayerRegistry, RoundTripsEveryRegisteredKind) {
  register_scale();
  loom_test::register_affine();
  const auto all = cases();
  const std::vector<std::string> kinds = nn::registered_layer_kinds();
  EXPECT_GE(kinds.size(), 34u);
  TempDir tmp;
  for (const std::string& kind : kinds) {
    SCOPED_TRACE(kind);
    auto it = all.find(kind);
    if (it == all.end()) {
      ADD_FAILURE() << "no round-trip case for the registered kind '" << kind << "': add one to cases()";
      continue;
    }
    manual_seed(3);
    Case c = it->second();
    ASSERT_TRUE(graph_has_kind(c.graph, kind));
    const std::string path = (tmp.dir / (kind + ".safetensors")).string();
    io::save_model(path, c.graph);
    Graph back = io::load_model(path);
    ASSERT_EQ(back.nodes().size(), c.graph.nodes().size());
    for (size_t k = 0; k < back.nodes().size(); ++k) {
      EXPECT_EQ(std::string(back.nodes()[k].kind()), c.graph.nodes()[k].kind());
      EXPECT_EQ(back.nodes()[k].name(), c.graph.nodes()[k].name());
      EXPECT_EQ(back.nodes()[k].shape(), c.graph.nodes()[k].shape());
      EXPECT_EQ(back.nodes()[k].options().to_json(), c.graph.nodes()[k].options().to_json());
    }
    const auto p0 = c.graph.parameters(), p1 = back.parameters();
    ASSERT_EQ(p0.size(), p1.size());
    for (size_t i = 0; i < p0.size(); ++i) EXPECT_TRUE(same_bytes(p0[i], p1[i])) << "parameter " << i;
    const auto b0 = buffers(c.graph), b1 = buffers(back);
    ASSERT_EQ(b0.size(), b1.size());
    for (size_t i = 0; i < b0.size(); ++i) EXPECT_TRUE(same_bytes(b0[i], b1[i])) << "buffer " << i;
    if (c.feed) {
      c.feed(c.graph);
      c.feed(back);
    }
    nn::ModeScope eval(nn::Mode::Eval);
    const auto y0 = c.graph.compile().run(c.inputs), y1 = back.compile().run(c.inputs);
    ASSERT_EQ(y0.size(), y1.size());
    for (size_t i = 0; i < y0.size(); ++i) EXPECT_TRUE(same_bytes(y0[i], y1[i])) << "output " << i;
  }
}

TEST(LayerRegistry, TiedWeightsStayTiedAfterLoad) {
  manual_seed(1);
  Case c = cases().at("Linear")();
  TempDir tmp;
  const std::string path = (tmp.dir / "tied.safetensors").string();
  io::save_model(path, c.graph);
  Graph back = io::load_model(path);
  EXPECT_EQ(back.layer("tied").state().param("weights").impl(), back.layer("a").state().param("weights").impl());
  EXPECT_EQ(back.parameters().size(), 2u);  // a's weights and bias; tied has no bias and a's weights
}

TEST(LayerRegistry, UnregisteredKindsAreRefusedWhenSaving) {
  nn::Input x(3, Float32, "x");
  auto impl = std::make_shared<UnregisteredImpl>();
  impl->inputs = {x};
  impl->shape = x.shape();
  impl->name = "mine";
  Graph g = Graph::build({nn::Layer(impl)}, {x});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_to_json(g); }),
                           {"layer 'mine'", "kind 'NotRegistered'", "not registered", "nn::register_layer_kind"}));
  // a Lambda names itself and the way out
  Graph lg = Graph::build({nn::Lambda({x}, [](const std::vector<Tensor>& t) { return t[0]; }, x.shape(), Float32, "fn")}, {x});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_to_json(lg); }), {"'fn'", "Lambda", "Writing a layer"}));
}

TEST(LayerRegistry, UnknownKindsInAFileNameTheRegisteredOnes) {
  register_scale();
  nn::Input x(4, Float32, "x");
  std::string json = graph_to_json(Graph::build({Scale(x, 1, "s")}, {x}));
  const size_t at = json.find("\"Scale\"");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 7, "\"Scale2\"");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(json); }),
                           {"layer 's'", "unknown kind 'Scale2'", "Linear", "Scale", "register_layer_kind"}));
}

TEST(LayerRegistry, RegistrationErrors) {
  register_scale();
  auto make = [](const nn::LayerSpec& s) -> nn::Layer { return s.input(); };
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::register_layer_kind("Linear", make); }),
                           {"'Linear'", "already registered"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::register_layer_kind("Scale", make); }), {"'Scale'", "already registered"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::register_layer_kind("", make); }), {"empty"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::register_layer_kind("Empty", nn::LayerFactory()); }),
                           {"'Empty'", "empty factory"}));
  EXPECT_FALSE(nn::is_layer_kind_registered("Empty"));
  EXPECT_TRUE(nn::is_layer_kind_registered("Linear"));
}

// KindInfo: the defaults a kind is registered with are its attributes' defaults, the keys the
// layer saves; building from them plus the required fields gives the layer the kind's own
// constructor gives (what the Python module's loom.layers relies on).
TEST(LayerRegistry, KindInfoListsEveryOptionWithItsDefault) {
  const nn::KindInfo linear = nn::layer_kind_info("Linear");
  EXPECT_FALSE(linear.source);
  EXPECT_EQ(linear.defaults.to_json(), nn::write_attributes(nn::LinearAttributes{}).to_json());
  EXPECT_TRUE(nn::layer_kind_info("Input").source);
  EXPECT_TRUE(nn::layer_kind_info("Param").source);
  EXPECT_FALSE(nn::layer_kind_info("Add").source);

  nn::Input x(4, Float32, "ki_x");
  nn::Options o = linear.defaults;
  o.set_int("n_units", 3).set_bool("bias", false);
  const nn::Layer built = nn::make_layer("Linear", {.name = "ki_built", .inputs = {x}, .options = o, .tied = {}});
  const nn::Linear direct(x, 3, {.bias = false}, "ki_direct");
  EXPECT_EQ(built.options().to_json(), direct.options().to_json());
  EXPECT_EQ(built.shape(), direct.shape());

  // the same for a kind whose defaults leave per-axis lists empty (the factory fills them)
  nn::Options c = nn::layer_kind_info("Conv2D").defaults;
  c.set_int("filters", 2).set_ints("kernel_size", {3});
  nn::Input img(Shape{-1, 1, 5, 5}, Float32, "ki_img");
  EXPECT_EQ(nn::make_layer("Conv2D", {.name = "ki_conv", .inputs = {img}, .options = c, .tied = {}}).options().to_json(),
            nn::Conv2D(img, 2, 3, {}, "ki_conv_direct").options().to_json());

  EXPECT_TRUE(contains_all(error_message<ValueError>([] { nn::layer_kind_info("NoSuchKind"); }), {"'NoSuchKind'", "Linear"}));
}

TEST(LayerRegistry, UserKindKeepsItsKindInfo) {
  register_scale();
  EXPECT_EQ(nn::layer_kind_info("Scale").defaults.to_json(), "{}");  // registered without one
  static std::once_flag once;
  std::call_once(once, [] {
    nn::register_layer_kind(
        "ScaleWithInfo", [](const nn::LayerSpec& s) -> nn::Layer { return Scale(s.input(), s.options.get_float("offset"), s.name); },
        {.defaults = nn::Options().set_float("offset", 1.5), .source = false});
  });
  const nn::KindInfo info = nn::layer_kind_info("ScaleWithInfo");
  EXPECT_EQ(info.defaults.get_float("offset"), 1.5);
  EXPECT_FALSE(info.source);
}

TEST(LayerRegistry, OptionsCheckTypesAndRanges) {
  nn::Options o = nn::Options::from_json(R"({"n": 3, "f": "NaN", "big": 1e300, "s": "x", "v": [1, 2]})", "layer 'l'");
  EXPECT_EQ(o.get_int("n", 1, 10), 3);
  EXPECT_TRUE(std::isnan(o.get_float("f")));
  EXPECT_EQ(o.get_ints("v"), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { o.get_int("n", 4, 10); }), {"layer 'l'", "field 'n'", "[4, 10]"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { o.get_int("big"); }), {"field 'big'", "an integer"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { o.get_bool("s"); }), {"field 's'", "true or false"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { o.get_string("missing"); }), {"lacks the field 'missing'"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { nn::Options::from_json("[1]", "here"); }), {"here", "JSON object"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { nn::Options::from_json("{", "here"); }), {"here", "not JSON"}));
  // set_float keeps non-finite values readable
  nn::Options w;
  w.set_float("inf", INFINITY).set_ints("e", {}).set_object("o", nn::Options().set_bool("b", true));
  nn::Options r = nn::Options::from_json(w.to_json());
  EXPECT_EQ(r.get_float("inf"), INFINITY);
  EXPECT_TRUE(r.get_ints("e").empty());
  EXPECT_TRUE(r.get_object("o").get_bool("b"));
}
