// ONNX export, the C++ side (tests/onnx/check_onnxruntime.py is the other): a graph per exported
// layer kind and every zoo model (small sizes), each exported with io::export_onnx, read back as
// an onnx::ModelProto, passed through libonnx's checker and its shape inference in strict mode
// (type checks, node errors thrown, data propagation), whose output shapes must agree with Loom's; then Loom's outputs at batch 1
// and 3 are written next to the model (NAME.onnx, NAME_b1.npz, NAME_b3.npz: input<i>, output<j>)
// for ONNX Runtime to run and compare. The directory is LOOM_ONNX_DIR (default ./onnx_cases).
// Also: the error that lists every unexportable layer at once, and a kind of one's own that
// registers its exporter.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <set>
#include <sstream>

using namespace loom;
namespace fs = std::filesystem;

namespace {

std::string out_dir() {
  const char* d = std::getenv("LOOM_ONNX_DIR");
  const std::string dir = d && *d ? d : "onnx_cases";
  fs::create_directories(dir);
  return dir;
}

struct Case {
  Graph graph;
  std::vector<Shape> sample;  // per input: the shape without the batch
  int64_t id_range = 0;       // > 0: int64 ids in [0, id_range) for Int64 inputs
  bool external_data = false;    // exported with OnnxExportOptions::external_data: the weights in NAME.onnx.data
  bool fold_batch_norm = false;  // exported with OnnxExportOptions::fold_batch_norm: no BatchNormalization node left
  // exported with this OnnxExportOptions::external_data_threshold (bytes), external_data false:
  // the automatic switch to NAME.onnx.data, taken at a small size instead of 2 GB (< 0: the default)
  int64_t external_threshold = -1;
};

// Non-trivial state: biases, batch norm statistics and scales away from their initial values.
void randomize_state(const Graph& g) {
  for (auto& [name, t] : io::graph_state(g)) {
    if (!is_floating(t.dtype())) continue;
    const std::string& key = name;  // (a structured binding is not captured by lambdas in C++20's clang)
    const auto ends = [&key](const char* s) { return key.size() >= std::strlen(s) && key.compare(key.size() - std::strlen(s), std::string::npos, s) == 0; };
    NoGrad ng;
    Tensor x = t;
    if (ends("running_var")) x.copy_(uniform(t.shape(), 0.5, 2.0));
    else if (ends("running_mean") || ends("bias")) x.copy_(uniform(t.shape(), -0.5, 0.5));
    else if (ends("/weight")) x.copy_(uniform(t.shape(), 0.5, 1.5));
  }
}

Tensor sample_input(const nn::Layer& in, const Shape& s, int64_t batch, int64_t id_range) {
  Shape full{batch};
  full.insert(full.end(), s.begin(), s.end());
  if (in.dtype() == DType::Bool) {  // a padding mask: random, the first position kept, except
    // in a batch of 3: the second sequence starts with 2 padded positions (left padding: under a
    // causal mask its first 2 queries see no key) and the third is padding alone (no query sees
    // a key): those queries weigh nothing (0), where ONNX's Softmax alone would give NaN
    Tensor keep = greater(uniform(full, 0.0, 1.0), scalar_tensor(0.3, Float32));
    keep.index_put_({Slice(), 0}, true);
    if (batch == 3) {
      keep.index_put_({1, Slice(0, 2)}, false);
      keep.index_put_({2}, false);
    }
    return keep;
  }
  if (in.dtype() == DType::Int64) return astype(floor(uniform(full, 0, static_cast<double>(id_range) - 1e-3)), DType::Int64);
  return uniform(full, -1.0, 1.0, in.dtype());
}

// export, check, infer shapes, write Loom's outputs
void check_case(const std::string& name, const Case& c) {
  SCOPED_TRACE(name);
  manual_seed(7);
  randomize_state(c.graph);
  const std::string dir = out_dir(), path = dir + "/" + name + ".onnx";
  io::OnnxExportOptions options;
  options.fold_batch_norm = c.fold_batch_norm;
  options.external_data = c.external_data;
  if (c.external_threshold >= 0) options.external_data_threshold = c.external_threshold;
  io::export_onnx(c.graph, path, options);
  // the automatic switch: taken past the threshold, not below it
  const bool split = c.external_data || c.external_threshold >= 0;
  if (c.external_threshold >= 0) {
    const int64_t whole = static_cast<int64_t>(io::encode_onnx(c.graph, options).size());
    EXPECT_GE(whole, c.external_threshold) << "the case's model must pass its threshold";
    const std::string below = dir + "/" + name + "_below.onnx.tmp";
    options.external_data_threshold = whole + 1;
    io::export_onnx(c.graph, below, options);
    EXPECT_FALSE(fs::exists(below + ".data")) << "split below the threshold";
    fs::remove(below);
  }

  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(ss.str()));
  EXPECT_EQ(model.ir_version(), 8);
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).version(), 17);
  // in memory (external data would be looked for in the working directory), and from the file
  if (!split) ASSERT_NO_THROW(onnx::checker::check_model(model));
  ASSERT_NO_THROW(onnx::checker::check_model(path));
  EXPECT_EQ(fs::exists(path + ".data"), split);
  if (split) {
    int external = 0;
    for (const auto& t : model.graph().initializer()) {
      const bool small = t.has_raw_data() && t.raw_data().size() < 1024;  // shapes stay inside
      EXPECT_EQ(t.data_location() == onnx::TensorProto::EXTERNAL, !small) << t.name();
      external += !small;
    }
    EXPECT_EQ(external, 4) << "conv2, fc1, fc2, fc3 weights (conv1 and the biases are under 1 KB)";
  }
  onnx::ModelProto inferred = model;
  ASSERT_NO_THROW(onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(), {1, 1, 1}));
  // names from the graph
  ASSERT_EQ(static_cast<size_t>(model.graph().input_size()), c.graph.inputs().size());
  for (size_t i = 0; i < c.graph.inputs().size(); ++i) EXPECT_EQ(model.graph().input(static_cast<int>(i)).name(), c.graph.inputs()[i].name());
  ASSERT_EQ(static_cast<size_t>(model.graph().output_size()), c.graph.outputs().size());
  for (size_t i = 0; i < c.graph.outputs().size(); ++i) EXPECT_EQ(model.graph().output(static_cast<int>(i)).name(), c.graph.outputs()[i].name());
  EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
  if (c.fold_batch_norm)
    for (const auto& n : model.graph().node()) EXPECT_NE(n.op_type(), "BatchNormalization") << n.name() << " was not folded";

  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad ng;
  const Plan plan = c.graph.compile();
  for (int64_t batch : {1, 3}) {
    std::map<std::string, Tensor> arrays;
    std::vector<Tensor> xs;
    for (size_t i = 0; i < c.graph.inputs().size(); ++i) {
      xs.push_back(sample_input(c.graph.inputs()[i], c.sample.at(i), batch, c.id_range));
      arrays["input" + std::to_string(i)] = xs.back();
    }
    const std::vector<Tensor> ys = plan.run(xs);
    for (size_t j = 0; j < ys.size(); ++j) arrays["output" + std::to_string(j)] = ys[j].contiguous();
    // the inferred output shapes (where ONNX's shape inference knows them) agree with Loom's
    for (size_t j = 0; j < ys.size(); ++j) {
      const auto& vi = inferred.graph().output(static_cast<int>(j)).type().tensor_type().shape();
      ASSERT_EQ(static_cast<int64_t>(vi.dim_size()), ys[j].ndim()) << "output " << j;
      for (int d = 1; d < vi.dim_size(); ++d) {
        if (vi.dim(d).has_dim_value()) {
          EXPECT_EQ(vi.dim(d).dim_value(), ys[j].shape()[static_cast<size_t>(d)]) << "output " << j << " axis " << d;
        }
      }
    }
    data::save_npz(dir + "/" + name + "_b" + std::to_string(batch) + ".npz", arrays);
  }
}

nn::Input image(int64_t c = 3) { return nn::Input(Shape{-1, c, -1, -1}, Float32, "image"); }

Case one(const nn::Layer& out, const nn::Input& in, Shape sample) { return {Graph::build({out}, {in}), {std::move(sample)}}; }

// ----------------------------------------------------------------------------- a graph per kind
std::map<std::string, std::function<Case()>> kind_cases() {
  std::map<std::string, std::function<Case()>> m;
  m["linear"] = [] {
    nn::Input x(6, Float32, "x");
    return one(nn::Linear(x, 5, {}, "fc"), x, {6});
  };
  m["linear_no_bias_transposed"] = [] {
    nn::Input x(6, Float32, "x");
    return one(nn::Linear(x, 4, nn::LinearOptions{.bias = false, .weight_init = nn::Init::glorot_uniform(), .bias_init = nn::Init::zeros(), .shared_weights = std::nullopt, .transpose_weights = true}, "fc"), x, {6});
  };
  m["linear_3d"] = [] {
    nn::Input x(Shape{-1, 5, 6}, Float32, "x");
    return one(nn::Linear(x, 3, {}, "fc"), x, {5, 6});
  };
  // by name: the named constants (nn::relu, ...) are not exported from libloom (no LOOM_API) at this commit
  for (const char* name : {"identity", "relu", "tanh", "sigmoid", "gelu", "elu", "leaky_relu", "softplus", "softmax", "log_softmax",
                           "silu", "gelu_tanh"})
    m[std::string("activation_") + name] = [name] {
      const nn::ActivationFn* fn = &nn::activation_by_name(name);
      nn::Input x(7, Float32, "x");
      return one(nn::Activation(nn::Linear(x, 9, {}, "fc"), *fn, "act"), x, {7});
    };
  m["conv2d"] = [] {
    auto x = image();
    return one(nn::Conv2D(x, 4, 3, {.stride = 2, .padding = 1}, "conv"), x, {3, 9, 10});
  };
  m["conv2d_same_dilated_grouped"] = [] {
    auto x = image(4);
    return one(nn::Conv2D(x, 6, {3, 2}, {.padding = "same", .dilation = {2, 1}, .groups = 2, .bias = false}, "conv"), x, {4, 8, 7});
  };
  m["conv2d_asymmetric_padding"] = [] {
    auto x = image();
    return one(nn::Conv2D(x, 2, 3, {.padding = std::vector<int64_t>{0, 1, 2, 1}}, "conv"), x, {3, 6, 6});
  };
  m["conv1d"] = [] {
    nn::Input x(Shape{-1, 3, -1}, Float32, "seq");
    return one(nn::Conv1D(x, 5, 3, {.padding = 1}, "conv"), x, {3, 11});
  };
  m["conv2d_transpose"] = [] {
    auto x = image(4);
    return one(nn::Conv2DTranspose(x, 3, 3, {.stride = 2, .padding = 1, .output_padding = 1}, "deconv"), x, {4, 5, 6});
  };
  m["batch_norm_2d"] = [] {
    auto x = image();
    return one(nn::BatchNorm(x, {}, "bn"), x, {3, 5, 5});
  };
  m["batch_norm_folded_into_conv_and_linear"] = [] {
    auto x = image(4);
    nn::Layer h = nn::BatchNorm(nn::Conv2D(x, 4, 3, {.stride = 1, .padding = 1, .dilation = 1, .groups = 2, .bias = true}, "conv"), {}, "bn");
    nn::Layer g = nn::BatchNorm(nn::Conv2D(h, 4, 1, {.stride = 1, .padding = 0, .dilation = 1, .groups = 1, .bias = false}, "conv_nb"),
                                {.affine = false}, "bn_no_affine");
    nn::Layer f = nn::BatchNorm(nn::Linear(nn::GlobalPool(g, nn::GlobalPool::Mode::Avg, "gap"), 5, {}, "fc"), {}, "bn_fc");
    Case c = one(f, x, {4, 6, 5});
    c.fold_batch_norm = true;
    return c;
  };
  m["batch_norm_1d_no_affine"] = [] {
    nn::Input x(6, Float32, "x");
    return one(nn::BatchNorm(x, {.affine = false}, "bn"), x, {6});
  };
  m["layer_norm"] = [] {
    nn::Input x(Shape{-1, 4, 6}, Float32, "x");
    return one(nn::LayerNorm(x, 1e-5, "ln"), x, {4, 6});
  };
  m["rms_norm"] = [] {
    nn::Input x(Shape{-1, 4, 6}, Float32, "x");
    return one(nn::RMSNorm(x, 1e-5, "rms"), x, {4, 6});
  };
  m["swiglu"] = [] {
    nn::Input x(Shape{-1, 5, 6}, Float32, "x");
    return one(nn::SwiGLU(x, 16, nn::Init::glorot_uniform(), "mlp"), x, {5, 6});
  };
  m["max_pool"] = [] {
    auto x = image();
    return one(nn::MaxPool2D(x, 3, {.stride = 2, .padding = 1}, "pool"), x, {3, 9, 8});
  };
  m["avg_pool_padded"] = [] {
    auto x = image();
    return one(nn::AvgPool2D(x, 3, {.stride = 2, .padding = 1}, "pool"), x, {3, 9, 8});
  };
  m["max_pool_ceil"] = [] {
    auto x = image();
    return one(nn::MaxPool2D(x, 2, {.ceil_mode = true}, "pool"), x, {3, 7, 9});
  };
  m["global_avg_pool"] = [] {
    auto x = image();
    return one(nn::GlobalPool(x, nn::GlobalPool::Mode::Avg, "gap"), x, {3, 5, 4});
  };
  m["global_max_pool"] = [] {
    auto x = image();
    return one(nn::GlobalPool(x, nn::GlobalPool::Mode::Max, "gmp"), x, {3, 5, 4});
  };
  m["adaptive_avg_pool"] = [] {
    auto x = image();
    return one(nn::AdaptiveAvgPool2D(x, {3, 2}, "aap"), x, {3, 7, 5});
  };
  m["adaptive_avg_pool_upsampling"] = [] {
    auto x = image();
    return one(nn::AdaptiveAvgPool2D(x, {4, 4}, "aap"), x, {3, 2, 3});
  };
  m["flatten_reshape_transpose_flip"] = [] {
    auto x = image(2);
    nn::Layer h = nn::Flatten(x, "flat");
    h = nn::Reshape(h, {4, -1}, "reshape");
    h = nn::Transpose(h, {1, 0}, "transpose");
    h = nn::Flip(h, {0}, "flip");
    return one(h, x, {2, 2, 3});
  };
  m["slice_channels_and_columns"] = [] {
    auto x = image(6);
    nn::Layer a = nn::AxisSlice(x, 0, 0, 3, 1, "half");  // x.chunk(2, dim=1)[0]
    nn::Layer b = nn::AxisSlice(nn::AxisSlice(x, 0, 1, 100, 2, "odd"), 2, -3, nn::Field::kMaxSize, 1, "right");
    return one(nn::Concat({a, nn::AxisSlice(b, 2, 0, 1, 1, "col")}, 3, "cat"), x, {6, 4, 5});
  };
  m["drop_connect"] = [] {
    nn::Input x(6, Float32, "x");
    return one(nn::DropConnect(x, 4, 0.3, {}, "dc"), x, {6});
  };
  m["dropout_param_probability"] = [] {
    nn::Input x(6, Float32, "x");
    return one(nn::Dropout(nn::Linear(x, 4, {}, "fc"), nn::Param(0.25, "p"), 1, "drop"), x, {6});
  };
  m["param_scaled"] = [] {
    nn::Input x(6, Float32, "x");
    return one(nn::Multiply({nn::Linear(x, 4, {}, "fc"), nn::Param(0.25, "p")}, "scaled"), x, {6});
  };
  m["float64_linear_tanh_softmax"] = [] {
    nn::Input x(5, Float64, "x");
    nn::Layer h = nn::Activation(nn::Linear(x, 6, {}, "fc"), nn::activation_by_name("tanh"), "tanh");
    return one(nn::Activation(nn::Linear(h, 3, {}, "fc2"), nn::activation_by_name("softmax"), "softmax"), x, {5});
  };
  m["dropout"] = [] {
    nn::Input x(6, Float32, "x");
    return one(nn::Dropout(nn::Linear(x, 4, {}, "fc"), 0.5, 1, "drop"), x, {6});
  };
  m["merges"] = [] {
    nn::Input x(6, Float32, "x");
    nn::Layer a = nn::Linear(x, 4, {}, "a"), b = nn::Linear(x, 4, {}, "b"), c = nn::Linear(x, 4, {}, "c");
    nn::Layer s = nn::Add({a, b, c}, "sum"), d = nn::Subtract(a, b, "sub"), p = nn::Multiply({a, b, c}, "mul"), mn = nn::Mean({a, c}, "mean");
    return one(nn::Concat({s, d, p, mn}, -1, "cat"), x, {6});
  };
  m["concat_channels"] = [] {
    auto x = image(2);
    return one(nn::Concat({nn::Conv2D(x, 3, 1, {}, "c1"), nn::Conv2D(x, 2, 1, {}, "c2")}, 1, "cat"), x, {2, 4, 4});
  };
  m["residual_gate"] = [] {
    nn::Input x(5, Float32, "x");
    nn::Layer r = nn::Residual(x, nn::Linear(x, 3, {}, "block"), "res");  // projected (5 -> 3)
    nn::Layer r2 = nn::Residual(r, nn::Linear(r, 3, {}, "block2"), "res2");
    return one(nn::Gate(r2, x, "gate"), x, {5});
  };
  m["lookup"] = [] {
    nn::Input ids(Shape{-1, 5}, Int64, "ids");
    Case c = one(nn::Lookup(ids, 11, 4, {.padding_id = 0}, "emb"), ids, {5});
    c.id_range = 11;
    return c;
  };
  m["one_hot"] = [] {
    nn::Input ids(Shape{-1, 5}, Int64, "ids");
    Case c = one(nn::OneHot(ids, 7, Float32, "onehot"), ids, {5});
    c.id_range = 7;
    return c;
  };
  m["two_inputs_two_outputs"] = [] {
    nn::Input x(4, Float32, "x"), y(4, Float32, "y");
    nn::Layer s = nn::Add({x, y}, "sum");
    nn::Layer out1 = nn::Activation(nn::Linear(s, 3, {}, "fc"), nn::activation_by_name("relu"), "out1");
    return Case{Graph::build({out1, s}, {x, y}), {{4}, {4}}};
  };
  // recurrent: options spelled out with the activation given (a default CellOptions names nn::tanh)
  const auto rnn_case = [](const char* cell, const char* act, bool sequences, bool bidirectional, bool reverse, bool bias) {
    return [=] {
      nn::Input x(Shape{-1, -1, 5}, Float32, "seq");
      nn::RNNOptions o{.cell = std::string(cell) == "LSTM" ? nn::CellKind::LSTM : std::string(cell) == "GRU" ? nn::CellKind::GRU : nn::CellKind::RNN,
                       .cell_options = nn::CellOptions{.activation = nn::activation_by_name(act), .weight_init = nn::Init::glorot_uniform(),
                                                       .recurrent_init = nn::Init::orthogonal(), .bias = bias},
                       .return_sequences = sequences, .reverse = reverse, .bidirectional = bidirectional, .stateful = false};
      Case c = one(nn::RNN(x, 4, o, "rnn"), x, {6, 5});
      return c;
    };
  };
  m["rnn_lstm_sequences"] = rnn_case("LSTM", "tanh", true, false, false, true);
  m["rnn_lstm_last_reverse"] = rnn_case("LSTM", "tanh", false, false, true, true);
  m["rnn_lstm_bidirectional_no_bias"] = rnn_case("LSTM", "tanh", true, true, false, false);
  m["rnn_gru_sequences"] = rnn_case("GRU", "tanh", true, false, false, true);
  m["rnn_gru_bidirectional_last"] = rnn_case("GRU", "tanh", false, true, false, true);
  m["rnn_simple_relu"] = rnn_case("RNN", "relu", true, false, false, true);
  m["rnn_simple_tanh_last"] = rnn_case("RNN", "tanh", false, false, false, true);
  for (const char* cell : {"LSTMCell", "GRUCell", "RNNCell"})
    m[std::string("cell_") + cell] = [cell] {
      const std::string k = cell;
      const int64_t n = 4, units = k == "LSTMCell" ? 2 * n : n;
      nn::Input x(5, Float32, "x"), st(units, Float32, "state");
      const nn::CellOptions o{.activation = nn::activation_by_name(k == "RNNCell" ? "relu" : "tanh"), .weight_init = nn::Init::glorot_uniform(),
                              .recurrent_init = nn::Init::orthogonal(), .bias = k != "GRUCell"};
      nn::Layer next = k == "LSTMCell" ? nn::Layer(nn::LSTMCell(x, st, n, o, "cell"))
                       : k == "GRUCell" ? nn::Layer(nn::GRUCell(x, st, n, o, "cell"))
                                        : nn::Layer(nn::RNNCell(x, st, n, o, "cell"));
      return Case{Graph::build({next}, {x, st}), {{5}, {units}}};
    };
  m["module_reused"] = [] {
    nn::Input in(6, Float32, "block_in");
    const nn::Module block({in}, nn::Activation(nn::Linear(in, 6, {}, "fc"), nn::activation_by_name("tanh"), "act"), "block");
    nn::Input x(6, Float32, "x");
    const nn::Layer b1 = block.reuse_with(x, "block1"), b2 = block.reuse_with(b1, "block2");  // the same weights twice
    return one(nn::Linear(b2, 2, {}, "head"), x, {6});
  };
  m["module_two_outputs"] = [] {
    nn::Input in(5, Float32, "in");
    const nn::Layer a = nn::Linear(in, 3, {}, "a"), c = nn::Activation(a, nn::activation_by_name("sigmoid"), "c");
    const nn::Module mod({in}, std::vector<nn::Layer>{a, c}, "two");
    nn::Input x(5, Float32, "x");
    const nn::Layer used = mod.reuse_with(x, "used");
    return one(nn::Concat({nn::module_output(used, 1, "second"), nn::module_output(used, 0, "first")}, -1, "cat"), x, {5});
  };
  m["sequential"] = [] {
    nn::Input x(4, Float32, "x");
    const nn::Layer seq = nn::Sequential(x, {nn::Linear(5), [](const nn::Layer& h) { return nn::Activation(h, nn::activation_by_name("elu")); },
                                             nn::Linear(3)}, "seq");
    return one(seq, x, {4});
  };
  m["attention_cross_causal"] = [] {
    nn::Input q(Shape{-1, 5, 8}, Float32, "query"), kv(Shape{-1, 5, 8}, Float32, "memory");
    return Case{Graph::build({nn::MultiHeadAttention(q, kv, kv, 2, {.causal = true, .bias = true}, std::nullopt, "mha")}, {q, kv}), {{5, 8}, {5, 8}}};
  };
  m["attention_padding_mask_no_bias"] = [] {
    nn::Input q(Shape{-1, 4, 6}, Float32, "query"), kv(Shape{-1, 7, 6}, Float32, "memory"), keep(Shape{-1, 7}, Bool, "keep");
    return Case{Graph::build({nn::MultiHeadAttention(q, kv, kv, 3, {.causal = false, .bias = false}, keep, "mha")}, {q, kv, keep}),
                {{4, 6}, {7, 6}, {7}}};
  };
  m["attention_grouped_query"] = [] {  // 4 query heads on 2 key / value heads: Expand of the kv heads
    nn::Input q(Shape{-1, 4, 8}, Float32, "query"), kv(Shape{-1, 6, 8}, Float32, "memory");
    return Case{Graph::build({nn::MultiHeadAttention(q, kv, kv, 4, {.causal = true, .bias = true, .n_kv_heads = 2}, std::nullopt, "mha")},
                             {q, kv}),
                {{4, 8}, {6, 8}}};
  };
  m["attention_rotary_grouped_llama3"] = [] {  // RoPE of the q and k heads, Llama 3's scaling, 4 query heads on 2
    nn::Input x(Shape{-1, 6, 16}, Float32, "x");
    const RotaryOptions rope{.base = 500000.0, .llama3_factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                             .original_max_positions = 8};
    return one(nn::MultiHeadAttention(x, x, x, 4, {.causal = true, .bias = false, .n_kv_heads = 2, .rotary = rope}, std::nullopt, "mha"),
               x, {6, 16});
  };
  m["attention_rotary_linear_cross"] = [] {  // queries and keys of different lengths, each from position 0
    nn::Input q(Shape{-1, 3, 8}, Float32, "query"), kv(Shape{-1, 5, 8}, Float32, "memory");
    const RotaryOptions rope{.base = 10000.0, .linear_factor = 2.0};
    return Case{Graph::build({nn::MultiHeadAttention(q, kv, kv, 2, {.causal = false, .bias = true, .rotary = rope}, std::nullopt, "mha")},
                             {q, kv}),
                {{3, 8}, {5, 8}}};
  };
  m["position_embedding"] = [] {  // GPT-2's token and learned position embeddings, added
    nn::Input ids(Shape{-1, -1}, Int64, "ids");
    const nn::Layer sum = nn::Add({nn::Lookup(ids, 7, 4, {}, "wte"), nn::PositionEmbedding(ids, 6, 4, nn::Init::normal(0, 0.02), "wpe")}, "embed");
    Case c = one(sum, ids, {5});
    c.id_range = 7;
    return c;
  };
  m["transformer_encoder_post_norm"] = [] {
    nn::Input x(Shape{-1, -1, 8}, Float32, "x");
    nn::TransformerOptions o{.ff_units = 16, .dropout = 0.1, .activation = nn::activation_by_name("relu"), .norm_first = false, .eps = 1e-5, .causal = false};
    return one(nn::TransformerEncoderLayer(x, 2, o, std::nullopt, "enc"), x, {5, 8});
  };
  m["transformer_encoder_norm_first_gelu_causal_masked"] = [] {
    nn::Input x(Shape{-1, 6, 8}, Float32, "x"), keep(Shape{-1, 6}, Bool, "keep");
    nn::TransformerOptions o{.ff_units = 12, .dropout = 0.0, .activation = nn::activation_by_name("gelu"), .norm_first = true, .eps = 1e-6, .causal = true};
    return Case{Graph::build({nn::TransformerEncoderLayer(x, 4, o, keep, "enc")}, {x, keep}), {{6, 8}, {6}}};
  };
  m["gpt_block_masked"] = [] {
    nn::Input x(Shape{-1, 6, 8}, Float32, "x"), keep(Shape{-1, 6}, Bool, "keep");
    return Case{Graph::build({nn::GptBlock(x, 2, {.ff_units = 20}, keep, "block")}, {x, keep}), {{6, 8}, {6}}};
  };
  m["llama_block_grouped_llama3"] = [] {
    nn::Input x(Shape{-1, -1, 16}, Float32, "x");
    const RotaryOptions rope{.base = 5e5, .llama3_factor = 8, .original_max_positions = 4};
    return one(nn::LlamaBlock(x, 4, {.ff_units = 24, .n_kv_heads = 2, .eps = 1e-5, .rotary = rope}, std::nullopt, "block"), x, {7, 16});
  };
  m["constant_added"] = [] {
    nn::Input x(Shape{-1, 3}, Float32, "x");
    nn::Constant c(uniform({3}, -1.0, 1.0), "offset");
    return one(nn::Add({x, c}, "sum"), x, {3});
  };
  return m;
}

// ----------------------------------------------------------------------------- the zoo, small
std::map<std::string, std::function<Case()>> zoo_cases() {
  std::map<std::string, std::function<Case()>> m;
  auto net = [](const zoo::Network& n, Shape sample) { return Case{n.graph, {std::move(sample)}}; };
  m["zoo_mlp"] = [net] { return net(zoo::mlp(8, {16, 12}, 3, nn::activation_by_name("gelu"), 0.2), {8}); };
  m["zoo_lenet"] = [net] { return net(zoo::lenet(10), {1, 28, 28}); };
  m["zoo_lenet_external_data"] = [net] {
    Case c = net(zoo::lenet(10), {1, 28, 28});
    c.external_data = true;
    return c;
  };
  m["zoo_lenet_external_auto"] = [net] {  // past a 64 KB threshold: split without external_data
    Case c = net(zoo::lenet(10), {1, 28, 28});
    c.external_threshold = 64 * 1024;
    return c;
  };
  m["zoo_fashion_cnn"] = [net] { return net(zoo::fashion_cnn(10, {.widths = {4, 8}, .convs_per_block = 2, .hidden = 16}), {1, 28, 28}); };
  m["zoo_vgg_a_small"] = [net] { return net(zoo::vgg(std::vector<int64_t>{64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}, 5, false, 0.5, 3, 32), {3, 32, 32}); };
  m["zoo_vgg_d_bn_small"] = [net] { return net(zoo::vgg(std::vector<int64_t>{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}, 5, true, 0.5, 3, 16), {3, 32, 32}); };
  m["zoo_resnet18"] = [net] { return net(zoo::resnet18(7), {3, 32, 32}); };
  m["zoo_densenet_small"] = [net] { return net(zoo::densenet(8, {2, 2}, 16, 2, 0.5, 5), {3, 32, 32}); };
  m["zoo_lstm_lm"] = [] {
    Case c{zoo::lstm_lm(13, 6, 5, 2, 0.1).graph, {{7}}};
    c.id_range = 13;
    return c;
  };
  m["zoo_transformer_classifier"] = [] {
    Case c{zoo::transformer_classifier(17, 6, 8, 2, 16, 2, 3, 0.1).graph, {{6}}};
    c.id_range = 17;
    return c;
  };
  m["zoo_gpt_small"] = [] {  // GPT-2's form: learned positions, GELU(tanh), tied head
    Case c{zoo::gpt({.vocab_size = 23, .n_positions = 16, .n_embd = 8, .n_layer = 2, .n_head = 2}).graph, {{6}}};
    c.id_range = 23;
    return c;
  };
  m["zoo_llama_small"] = [] {  // Llama's form: RMSNorm, RoPE, SwiGLU, grouped-query attention
    Case c{zoo::llama({.vocab_size = 23, .hidden_size = 8, .intermediate_size = 12, .num_hidden_layers = 2, .num_attention_heads = 2,
                       .num_key_value_heads = 1})
               .graph,
           {{6}}};
    c.id_range = 23;
    return c;
  };
  m["zoo_resnet18_folded"] = [net] {
    Case c = net(zoo::resnet18(7), {3, 32, 32});
    c.fold_batch_norm = true;
    return c;
  };
  m["zoo_unet"] = [net] { return net(zoo::unet(1, 2, 4, 2, true), {1, 16, 16}); };
  return m;
}

std::vector<std::string> names(const std::map<std::string, std::function<Case()>>& m) {
  std::vector<std::string> v;
  for (const auto& [k, _] : m) v.push_back(k);
  return v;
}

class OnnxKind : public ::testing::TestWithParam<std::string> {};
TEST_P(OnnxKind, ExportsChecksAndWritesOutputs) { check_case(GetParam(), kind_cases().at(GetParam())()); }
INSTANTIATE_TEST_SUITE_P(Export, OnnxKind, ::testing::ValuesIn(names(kind_cases())),
                         [](const auto& info) { return info.param; });

class OnnxZoo : public ::testing::TestWithParam<std::string> {};
TEST_P(OnnxZoo, ExportsChecksAndWritesOutputs) { check_case(GetParam(), zoo_cases().at(GetParam())()); }
INSTANTIATE_TEST_SUITE_P(Export, OnnxZoo, ::testing::ValuesIn(names(zoo_cases())), [](const auto& info) { return info.param; });

// Every registered kind but SparseInput (whose value is not a dense tensor) appears in some case
// above, so a kind registered later without an exporter fails here.
void collect_kinds(const Graph& g, std::set<std::string>& kinds) {
  for (const nn::Layer& l : g.nodes()) {
    kinds.insert(l.node().kind());
    if (const Graph* inner = nn::module_graph(l.node())) collect_kinds(*inner, kinds);
  }
}

TEST(OnnxExport, EveryRegisteredKindHasACase) {
  std::set<std::string> covered;
  for (const auto& cases : {kind_cases(), zoo_cases()})
    for (const auto& [name, make] : cases) collect_kinds(make().graph, covered);
  std::vector<std::string> missing;
  for (const std::string& k : nn::registered_layer_kinds())
    if (k != "SparseInput" && !covered.count(k)) missing.push_back(k);  // SparseInput: its own test below
  EXPECT_TRUE(missing.empty()) << "registered kinds no ONNX case exports: " << ::testing::PrintToString(missing);
}

// A SparseInput is a model input taking its dense rows (ONNX inputs are dense): Linear and
// DropConnect on it are MatMuls. Written as a case of its own (the SparseInput is not a positional
// input of the graph: its value is set on the layer).
TEST(OnnxExport, SparseInputIsADenseModelInput) {
  manual_seed(3);
  nn::SparseInput words(9, Float32, "words");
  const nn::Layer a = nn::Activation(nn::Linear(words, 4, {}, "fc"), nn::activation_by_name("relu"), "relu");
  const nn::Layer b = nn::DropConnect(words, 2, 0.3, {}, "dc");
  const Graph g = Graph::build({nn::Concat({a, b}, -1, "cat")});
  randomize_state(g);
  const std::string dir = out_dir(), path = dir + "/sparse_input.onnx";
  io::export_onnx(g, path);
  onnx::ModelProto model;
  {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    ASSERT_TRUE(model.ParseFromString(ss.str()));
  }
  ASSERT_EQ(model.graph().input_size(), 1);
  EXPECT_EQ(model.graph().input(0).name(), "words");
  EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(1).dim_value(), 9);
  ASSERT_NO_THROW(onnx::checker::check_model(model));
  onnx::ModelProto inferred = model;
  ASSERT_NO_THROW(onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(), {1, 1, 1}));
  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad ng;
  const Plan plan = g.compile();
  for (int64_t batch : {1, 3}) {
    const Tensor dense = uniform({batch, 9}, -1.0, 1.0) * astype(greater(uniform({batch, 9}), scalar_tensor(0.6, Float32)), Float32);
    words.set_value(SparseTensor::from_dense(dense));
    const std::vector<Tensor> ys = plan.run();
    data::save_npz(dir + "/sparse_input_b" + std::to_string(batch) + ".npz", {{"input0", dense.contiguous()}, {"output0", ys.at(0).contiguous()}});
  }
}

// ----------------------------------------------------------------------------- kinds of one's own
struct ScaleAttributes {
  double scale = 1;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("scale", scale);
  }
};
// y = scale * x^3, exported by the exporter registered for it
struct CubeImpl final : nn::KindBase<CubeImpl, ScaleAttributes> {
  const char* kind() const override { return "Cube"; }
  Tensor compute(const std::vector<Tensor>& in, nn::Mode) override { return in[0] * in[0] * in[0] * attrs.scale; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
};
// the same function with no exporter registered
struct UnregisteredImpl final : nn::KindBase<UnregisteredImpl, ScaleAttributes> {
  const char* kind() const override { return "Unregistered"; }
  Tensor compute(const std::vector<Tensor>& in, nn::Mode) override { return in[0] * attrs.scale; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
};

template <class Impl>
nn::Layer make_kind(const nn::Layer& x, double scale, const std::string& name) {
  auto impl = std::make_shared<Impl>();
  impl->attrs.scale = scale;
  impl->inputs = {x};
  impl->name = name;
  impl->shape = impl->output_shapes({x.shape()}).at(0);
  return nn::Layer(impl);
}

TEST(OnnxExport, AKindOfOnesOwnRegistersItsExporter) {
  io::register_onnx_exporter<CubeImpl>([](io::OnnxBuilder& b) {
    const double scale = nn::attributes_of<ScaleAttributes>(b.layer())->scale;
    const std::string sq = b.fresh("square"), cube = b.fresh("cube");
    b.node("Mul", {b.input(0), b.input(0)}, {sq});
    b.node("Mul", {sq, b.input(0)}, {cube});
    b.node("Mul", {cube, b.tensor(scalar_tensor(static_cast<float>(scale), Float32), "scale")}, {b.output()});
  });
  nn::Input x(5, Float32, "x");
  const nn::Layer cube = make_kind<CubeImpl>(nn::Linear(x, 4, {}, "fc"), 0.5, "cube");
  check_case("user_kind_cube", one(cube, x, {5}));
}

TEST(OnnxExport, EveryUnexportableLayerIsListedAtOnce) {
  nn::Input x(5, Float32, "x");
  nn::Layer h = nn::Linear(x, 4, {}, "fc");
  h = nn::Lambda({h}, [](const std::vector<Tensor>& t) { return t[0] * 2.0; }, Shape{-1, 4}, Float32, "doubled");
  h = nn::Activation(h, nn::ActivationFn{"swish", [](const Tensor& t) { return t * sigmoid(t); }}, "swish");
  h = make_kind<UnregisteredImpl>(h, 2.0, "mine");
  h = nn::Activation(h, nn::activation_by_name("relu"), "relu");
  const Graph g = Graph::build({h}, {x});
  const std::vector<std::string> bad = io::onnx_unexportable(g);
  ASSERT_EQ(bad.size(), 3u);
  EXPECT_EQ(bad[0].rfind("doubled (Lambda)", 0), 0u) << bad[0];
  EXPECT_EQ(bad[1].rfind("swish (Activation)", 0), 0u) << bad[1];
  EXPECT_EQ(bad[2].rfind("mine (Unregistered)", 0), 0u) << bad[2];
  const std::string path = out_dir() + "/not_written.onnx.tmp";
  try {
    io::export_onnx(g, path);
    FAIL() << "exported a graph with unexportable layers";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("3 layers cannot be exported"), std::string::npos) << msg;
    for (const char* s : {"doubled (Lambda)", "swish (Activation)", "'swish' has no ONNX form", "mine (Unregistered)"})
      EXPECT_NE(msg.find(s), std::string::npos) << s << " missing from: " << msg;
    EXPECT_EQ(msg.find("fc (Linear)"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(path));
  // the exportable rest exports
  EXPECT_TRUE(io::onnx_unexportable(Graph::build({nn::Activation(x, nn::activation_by_name("tanh"), "t")}, {x})).empty());
}

// Kinds of one's own named as built-in kinds: an exporter is found by the type of a kind's
// attributes, never by its name, so these are unexportable (no exporter registered for them), not
// written as the built-in kind (before, the one named "Residual" was written as an Add of its
// inputs, silently, and the one named "GlobalPool" refused for lacking GlobalPool's "mode" option).
struct NamedResidualImpl final : nn::KindBase<NamedResidualImpl, ScaleAttributes> {
  const char* kind() const override { return "Residual"; }
  Tensor compute(const std::vector<Tensor>& in, nn::Mode) override { return in[0] * in[1] * attrs.scale; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
};
struct NamedGlobalPoolImpl final : nn::KindBase<NamedGlobalPoolImpl, ScaleAttributes> {
  const char* kind() const override { return "GlobalPool"; }
  Tensor compute(const std::vector<Tensor>& in, nn::Mode) override { return in[0] * attrs.scale; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
};

TEST(OnnxExport, KindsAreFoundByTheirAttributesNotTheirNames) {
  nn::Input x(4, Float32, "x"), y(4, Float32, "y");
  auto residual = std::make_shared<NamedResidualImpl>();
  residual->inputs = {x, y};
  residual->name = "product";
  residual->shape = residual->output_shapes({x.shape(), y.shape()}).at(0);
  const nn::Layer pool = make_kind<NamedGlobalPoolImpl>(nn::Layer(residual), 2.0, "scaled");
  const std::vector<std::string> bad = io::onnx_unexportable(Graph::build({pool}, {x, y}));
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[0], "product (Residual): no ONNX exporter for this kind");
  EXPECT_EQ(bad[1], "scaled (GlobalPool): no ONNX exporter for this kind");
  // the built-in kinds of those names still export, by their attributes
  nn::Input img(Shape{-1, 3, 4, 4}, Float32, "img");
  const nn::Layer res = nn::Residual(x, nn::Linear(x, 6, {}, "fc"), "res");
  EXPECT_TRUE(io::onnx_unexportable(Graph::build({nn::GlobalPool(img, nn::GlobalPool::Mode::Max, "gp"), res}, {img, x})).empty());
}

TEST(OnnxExport, FixedBatch) {
  nn::Input x(3, Float32, "x");
  const Graph g = Graph::build({nn::Linear(x, 2, {}, "fc")}, {x});
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(io::encode_onnx(g, {.dynamic_batch = false, .batch_size = 4, .producer_name = "loom", .doc_string = ""})));
  EXPECT_EQ(m.graph().input(0).type().tensor_type().shape().dim(0).dim_value(), 4);
  onnx::checker::check_model(m);
}

}  // namespace
