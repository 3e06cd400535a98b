// ONNX export, the built-in exporters (loom/io/onnx.h, docs/onnx.md): each layer kind's nodes,
// found by the type of the kind's attributes (exporters.h); the recurrent layers, cells and
// attention are export_sequence.cpp's. The builder, the graph walk and the files are
// onnx_export.cpp's.
#include "io/onnx/exporters.h"

#include <cmath>

#include "io/onnx_proto.h"
#include "loom/core/error.h"
#include "loom/graph/module.h"
#include "loom/nn/layers.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "nn/conv_padding.h"

namespace loom::io::detail {

using B = OnnxBuilder;

// ONNX pads: all the begins, then all the ends.
std::vector<int64_t> onnx_pads(const std::vector<std::pair<int64_t, int64_t>>& p) {
  std::vector<int64_t> out;
  for (const auto& x : p) out.push_back(x.first);
  for (const auto& x : p) out.push_back(x.second);
  return out;
}

// y = act(x) into `out`; false for a function ONNX has no form of here.
bool activation(B& b, const nn::ActivationFn& fn, const std::string& x, const std::string& out) {
  struct Simple {
    const nn::ActivationFn* fn;
    const char* op;
  };
  static const Simple simple[] = {{&nn::identity, "Identity"}, {&nn::relu, "Relu"},       {&nn::tanh, "Tanh"},
                                  {&nn::sigmoid, "Sigmoid"},   {&nn::softplus, "Softplus"}};
  for (const Simple& s : simple)
    if (fn.is(*s.fn)) {
      b.node(s.op, {x}, {out});
      return true;
    }
  if (fn.is(nn::elu)) b.node("Elu", {x}, {out}, {{"alpha", 1.0f}});
  else if (fn.is(nn::leaky_relu)) b.node("LeakyRelu", {x}, {out}, {{"alpha", 0.01f}});
  else if (fn.is(nn::softmax)) b.node("Softmax", {x}, {out}, {{"axis", int64_t{-1}}});
  else if (fn.is(nn::log_softmax)) b.node("LogSoftmax", {x}, {out}, {{"axis", int64_t{-1}}});
  else if (fn.is(nn::relu6))
    b.node("Clip", {x, b.tensor(scalar_tensor(0.0, b.layer().dtype()), "min"), b.tensor(scalar_tensor(6.0, b.layer().dtype()), "max")}, {out});
  else if (fn.is(nn::hard_sigmoid)) b.node("HardSigmoid", {x}, {out}, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}});
  else if (fn.is(nn::hard_swish)) b.node("HardSwish", {x}, {out});
  else if (fn.is(nn::gelu)) {  // opset 17 has no Gelu: x * (1 + erf(x / sqrt 2)) / 2
    const std::string t = b.fresh("gelu_scaled"), e = b.fresh("gelu_erf"), p = b.fresh("gelu_plus1"), h = b.fresh("gelu_half_x");
    b.node("Mul", {x, b.tensor(scalar_tensor(1.0 / std::sqrt(2.0), b.layer().dtype()), "inv_sqrt2")}, {t});
    b.node("Erf", {t}, {e});
    b.node("Add", {e, b.tensor(scalar_tensor(1.0, b.layer().dtype()), "one")}, {p});
    b.node("Mul", {x, b.tensor(scalar_tensor(0.5, b.layer().dtype()), "half")}, {h});
    b.node("Mul", {h, p}, {out});
  } else if (fn.is(nn::gelu_tanh)) {  // x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), as loom::gelu computes it
    const auto c = [&](double v, const char* name) { return b.tensor(scalar_tensor(v, b.layer().dtype()), name); };
    const std::string x2 = b.fresh("gelu_x2"), x3 = b.fresh("gelu_x3"), k = b.fresh("gelu_cubic"), in = b.fresh("gelu_inner"),
                      sc = b.fresh("gelu_scaled"), th = b.fresh("gelu_tanh"), p = b.fresh("gelu_plus1"), h = b.fresh("gelu_half_x");
    b.node("Mul", {x, x}, {x2});
    b.node("Mul", {x2, x}, {x3});
    b.node("Mul", {x3, c(0.044715, "gelu_coefficient")}, {k});
    b.node("Add", {x, k}, {in});
    b.node("Mul", {in, c(std::sqrt(2.0 / M_PI), "sqrt_2_over_pi")}, {sc});
    b.node("Tanh", {sc}, {th});
    b.node("Add", {th, c(1.0, "one")}, {p});
    b.node("Mul", {x, c(0.5, "half")}, {h});
    b.node("Mul", {h, p}, {out});
  } else if (fn.is(nn::silu)) {  // x * sigmoid(x)
    const std::string s = b.fresh("silu_sigmoid");
    b.node("Sigmoid", {x}, {s});
    b.node("Mul", {x, s}, {out});
  } else
    return false;
  return true;
}

namespace {

std::vector<int64_t> iota(int64_t from, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = from + i;
  return v;
}



void export_linear(B& b, const nn::LinearAttributes& a) {
  nn::State& s = b.layer().state();
  std::string w = b.tensor(s.param("weights"), "weights");
  if (a.transpose_weights) {
    const std::string wt = b.fresh("weights_t");
    b.node("Transpose", {w}, {wt}, {{"perm", std::vector<int64_t>{1, 0}}});
    w = wt;
  }
  if (!a.bias) return b.node("MatMul", {b.input(0), w}, {b.output()});
  const std::string y = b.fresh("matmul");
  b.node("MatMul", {b.input(0), w}, {y});
  b.node("Add", {y, b.tensor(s.param("bias"), "bias")}, {b.output()});
}

// Eval mode: x W + b, the weights not dropped
void export_drop_connect(B& b, const nn::DropConnectAttributes& a) {
  nn::State& s = b.layer().state();
  const std::string w = b.tensor(s.param("weights"), "weights");
  if (!a.bias) return b.node("MatMul", {b.input(0), w}, {b.output()});
  const std::string y = b.fresh("matmul");
  b.node("MatMul", {b.input(0), w}, {y});
  b.node("Add", {y, b.tensor(s.param("bias"), "bias")}, {b.output()});
}

void export_conv(B& b, const nn::ConvAttributes& a) {
  nn::State& s = b.layer().state();
  std::vector<std::string> in{b.input(0), b.tensor(s.param("weights"), "weights")};
  if (a.bias) in.push_back(b.tensor(s.param("bias"), "bias"));
  b.node("Conv", in, {b.output()},
         {{"kernel_shape", a.kernel_size}, {"strides", a.stride}, {"dilations", a.dilation}, {"group", a.groups},
          {"pads", onnx_pads(nn::conv_padding(a))}});
}

void export_conv_transpose(B& b, const nn::ConvTransposeAttributes& a) {
  nn::State& s = b.layer().state();
  std::vector<std::string> in{b.input(0), b.tensor(s.param("weights"), "weights")};
  if (a.bias) in.push_back(b.tensor(s.param("bias"), "bias"));
  std::vector<int64_t> pads = a.padding;
  pads.insert(pads.end(), a.padding.begin(), a.padding.end());
  b.node("ConvTranspose", in, {b.output()},
         {{"kernel_shape", a.kernel_size}, {"strides", a.stride}, {"dilations", a.dilation}, {"group", a.groups},
          {"pads", pads}, {"output_padding", a.output_padding}});
}

void export_pool(B& b, const nn::PoolAttributes& a) {
  std::vector<int64_t> pads = a.padding;
  pads.insert(pads.end(), a.padding.begin(), a.padding.end());
  std::vector<OnnxAttribute> attrs{{"kernel_shape", a.kernel_size}, {"strides", a.stride}, {"pads", pads},
                                   {"ceil_mode", int64_t{a.ceil_mode ? 1 : 0}}};
  if (!a.max) attrs.push_back({"count_include_pad", int64_t{1}});  // avg_pool2d's default, as the layer runs it
  b.node(a.max ? "MaxPool" : "AveragePool", {b.input(0)}, {b.output()}, attrs);
}

void export_global_pool(B& b, const nn::GlobalPoolAttributes& a) {
  const bool max = a.max;
  const std::string y = b.fresh("pooled");
  b.node(max ? "GlobalMaxPool" : "GlobalAveragePool", {b.input(0)}, {y});
  b.node("Flatten", {y}, {b.output()}, {{"axis", int64_t{1}}});
}

// The (o, L) matrix whose row i averages [floor(i L / o), ceil((i + 1) L / o)) of an axis of
// dynamic length L (the axis `axis` of x): adaptive average pooling as two products.
std::string adaptive_matrix(B& b, const std::string& x, int64_t axis, int64_t o, const std::string& tag) {
  const std::string len = b.fresh(tag + "_len");  // (1,) int64
  b.node("Shape", {x}, {len}, {{"start", axis}, {"end", axis + 1}});
  const std::string len0 = b.fresh(tag + "_len0");  // a scalar
  b.node("Squeeze", {len, b.ints({0}, tag + "_axis0")}, {len0});
  const std::string j = b.fresh(tag + "_j");  // (L,)
  b.node("Range", {b.tensor(scalar_tensor(int64_t{0}, DType::Int64), tag + "_zero"), len0,
                   b.tensor(scalar_tensor(int64_t{1}, DType::Int64), tag + "_one")},
         {j});
  const std::string i = b.tensor(from_vector(iota(0, o), {o, 1}), tag + "_i");      // (o, 1)
  const std::string i1 = b.tensor(from_vector(iota(1, o), {o, 1}), tag + "_i1");    // (o, 1)
  const std::string oc = b.ints({o}, tag + "_o"), om1 = b.ints({o - 1}, tag + "_o_minus_1");
  const std::string il = b.fresh(tag + "_iL"), start = b.fresh(tag + "_start"), i1l = b.fresh(tag + "_i1L"),
                    i1l2 = b.fresh(tag + "_i1L_up"), end = b.fresh(tag + "_end");
  b.node("Mul", {i, len}, {il});
  b.node("Div", {il, oc}, {start});  // non-negative: truncation is floor
  b.node("Mul", {i1, len}, {i1l});
  b.node("Add", {i1l, om1}, {i1l2});
  b.node("Div", {i1l2, oc}, {end});  // ceil
  const std::string ge = b.fresh(tag + "_ge"), lt = b.fresh(tag + "_lt"), in = b.fresh(tag + "_in"), inf = b.fresh(tag + "_in_f"),
                    cnt = b.fresh(tag + "_count"), cntf = b.fresh(tag + "_count_f"), p = b.fresh(tag + "_matrix");
  b.node("GreaterOrEqual", {j, start}, {ge});
  b.node("Less", {j, end}, {lt});
  b.node("And", {ge, lt}, {in});
  b.node("Cast", {in}, {inf}, {{"to", int64_t{onnx::TensorProto::FLOAT}}});
  b.node("Sub", {end, start}, {cnt});
  b.node("Cast", {cnt}, {cntf}, {{"to", int64_t{onnx::TensorProto::FLOAT}}});
  b.node("Div", {inf, cntf}, {p});
  return p;
}

void export_adaptive_avg_pool(B& b, const nn::AdaptiveAvgPoolAttributes& a) {
  if (b.layer().dtype() != DType::Float32) throw ValueError("adaptive average pooling is exported for float32 only");
  const int64_t oh = a.output_size.at(0), ow = a.output_size.at(1);
  if (oh == 1 && ow == 1) return b.node("GlobalAveragePool", {b.input(0)}, {b.output()});
  const std::string x = b.input(0);
  const std::string ph = adaptive_matrix(b, x, 2, oh, "rows"), pw = adaptive_matrix(b, x, 3, ow, "cols");
  const std::string y1 = b.fresh("pooled_rows"), pwt = b.fresh("cols_matrix_t");
  b.node("MatMul", {ph, x}, {y1});  // (oh, H) @ (N, C, H, W) -> (N, C, oh, W)
  b.node("Transpose", {pw}, {pwt}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.node("MatMul", {y1, pwt}, {b.output()});  // (N, C, oh, W) @ (W, ow)
}

void export_batch_norm(B& b, const nn::BatchNormOptions& o) {
  nn::State& s = b.layer().state();
  const Tensor& mean = s.buffer("running_mean");
  const std::string scale = o.affine ? b.tensor(s.param("weight"), "weight") : b.tensor(ones(mean.shape(), b.layer().dtype()), "weight");
  const std::string bias = o.affine ? b.tensor(s.param("bias"), "bias") : b.tensor(zeros(mean.shape(), b.layer().dtype()), "bias");
  b.node("BatchNormalization", {b.input(0), scale, bias, b.tensor(mean, "running_mean"), b.tensor(s.buffer("running_var"), "running_var")},
         {b.output()}, {{"epsilon", static_cast<float>(o.eps)}, {"momentum", static_cast<float>(1.0 - o.momentum)}});
}

void export_layer_norm(B& b, const nn::LayerNormAttributes& a) {
  nn::State& s = b.layer().state();
  b.node("LayerNormalization", {b.input(0), b.tensor(s.param("weight"), "weight"), b.tensor(s.param("bias"), "bias")}, {b.output()},
         {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(a.eps)}});
}

}  // namespace

// opset 17 has no RMSNormalization (opset 23 does): x / sqrt(mean(x^2) + eps) * weight over the last axis
std::string rms_norm_value(B& b, const std::string& x, const Tensor& weight, double eps, const std::string& out) {
  const std::string sq = b.fresh("rms_square"), ms = b.fresh("rms_mean"), plus = b.fresh("rms_plus_eps"), r = b.fresh("rms_root"),
                    n = b.fresh("rms_normalized"), y = out.empty() ? b.fresh("rms_norm") : out;
  b.node("Mul", {x, x}, {sq});
  b.node("ReduceMean", {sq}, {ms}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}});
  b.node("Add", {ms, b.tensor(scalar_tensor(eps, b.layer().dtype()), "eps")}, {plus});
  b.node("Sqrt", {plus}, {r});
  b.node("Div", {x, r}, {n});
  b.node("Mul", {n, b.tensor(weight, "weight")}, {y});
  return y;
}

// down(silu(x gate) * (x up)) as MatMuls
std::string swiglu_value(B& b, const std::string& x, const nn::State& s, const std::string& out) {
  const std::string g = b.fresh("swiglu_gate"), sg = b.fresh("swiglu_sigmoid"), a = b.fresh("swiglu_silu"), u = b.fresh("swiglu_up"),
                    h = b.fresh("swiglu_gated"), y = out.empty() ? b.fresh("swiglu") : out;
  b.node("MatMul", {x, b.tensor(s.param("gate"), "gate")}, {g});
  b.node("Sigmoid", {g}, {sg});
  b.node("Mul", {g, sg}, {a});
  b.node("MatMul", {x, b.tensor(s.param("up"), "up")}, {u});
  b.node("Mul", {a, u}, {h});
  b.node("MatMul", {h, b.tensor(s.param("down"), "down")}, {y});
  return y;
}

namespace {

void export_rms_norm(B& b, const nn::RMSNormAttributes& a) { rms_norm_value(b, b.input(0), b.layer().state().param("weight"), a.eps, b.output()); }

void export_swiglu(B& b, const nn::SwiGLUAttributes&) { swiglu_value(b, b.input(0), b.layer().state(), b.output()); }

void export_activation(B& b, const nn::ActivationAttributes& a) {
  if (!activation(b, a.fn, b.input(0), b.output()))
    throw ValueError("the activation function '" + a.fn.name + "' has no ONNX form (Loom's named activations do)");
}

void export_merge(B& b, const nn::MergeAttributes& a) {
  const size_t n = b.layer().inputs().size();
  std::vector<std::string> in;
  for (size_t i = 0; i < n; ++i) in.push_back(b.input(i));
  switch (a.mode) {
    case nn::MergeMode::Concat: return b.node("Concat", in, {b.output()}, {{"axis", a.axis}});
    case nn::MergeMode::Sum: return b.node(n == 1 ? "Identity" : "Sum", in, {b.output()});
    case nn::MergeMode::Mean: return b.node(n == 1 ? "Identity" : "Mean", in, {b.output()});
    case nn::MergeMode::Subtract: return b.node("Sub", in, {b.output()});
    case nn::MergeMode::Multiply: {
      std::string acc = in[0];
      if (n == 1) return b.node("Identity", in, {b.output()});
      for (size_t i = 1; i < n; ++i) {
        const std::string y = i + 1 == n ? b.output() : b.fresh("product");
        b.node("Mul", {acc, in[i]}, {y});
        acc = y;
      }
      return;
    }
  }
}

void export_reshape(B& b, const nn::ReshapeAttributes& a) {
  std::vector<int64_t> target{0};  // 0: the batch, copied from the input
  for (int64_t d : a.shape) {
    if (d == 0) throw ValueError("a target shape with a 0 is not exported");
    target.push_back(d);
  }
  b.node("Reshape", {b.input(0), b.ints(target, "shape")}, {b.output()});
}

void export_transpose(B& b, const nn::TransposeAttributes& a) {
  std::vector<int64_t> perm{0};
  for (int64_t p : a.perm) perm.push_back(p + 1);
  b.node("Transpose", {b.input(0)}, {b.output()}, {{"perm", perm}});
}

void export_flip(B& b, const nn::FlipAttributes& a) {
  std::vector<int64_t> axes, starts, ends, steps;
  for (int64_t x : a.axes) {
    axes.push_back(x + 1);
    starts.push_back(-1);
    ends.push_back(INT64_MIN);
    steps.push_back(-1);
  }
  b.node("Slice", {b.input(0), b.ints(starts, "starts"), b.ints(ends, "ends"), b.ints(axes, "axes"), b.ints(steps, "steps")},
         {b.output()});
}

void export_slice(B& b, const nn::AxisSliceAttributes& a) {
  b.node("Slice", {b.input(0), b.ints({a.start}, "starts"), b.ints({a.stop}, "ends"), b.ints({a.axis + 1}, "axes"), b.ints({a.step}, "steps")},
         {b.output()});
}

void export_lookup(B& b, const nn::LookupAttributes&) {
  b.node("Gather", {b.tensor(b.layer().state().param("weights"), "weights"), b.input(0)}, {b.output()}, {{"axis", int64_t{0}}});
}

// GPT-2's learned positions: the table's rows 0 .. T-1, T the input's axis 1 (Shape, Slice)
void export_position_embedding(B& b, const nn::PositionEmbeddingAttributes&) {
  const std::string len = b.fresh("length");
  b.node("Shape", {b.input(0)}, {len}, {{"start", int64_t{1}}, {"end", int64_t{2}}});
  b.node("Slice", {b.tensor(b.layer().state().param("weights"), "weights"), b.ints({0}, "starts"), len, b.ints({0}, "axes")}, {b.output()});
}

void export_one_hot(B& b, const nn::OneHotAttributes& a) {
  const Tensor values = astype(from_vector<float>({0.0f, 1.0f}, {2}), a.dtype);
  b.node("OneHot", {b.input(0), b.ints({a.n_classes}, "depth"), b.tensor(values, "values")}, {b.output()}, {{"axis", int64_t{-1}}});
}

void export_residual(B& b, const nn::ResidualAttributes& a) {
  nn::State& s = b.layer().state();
  if (!a.projected) return b.node("Add", {b.input(0), b.input(1)}, {b.output()});
  const std::string p = b.fresh("projected");
  b.node("MatMul", {b.input(0), b.tensor(s.param("projection"), "projection")}, {p});
  b.node("Add", {p, b.input(1)}, {b.output()});
}

void export_gate(B& b, const nn::GateAttributes&) {
  nn::State& s = b.layer().state();
  const std::string m = b.fresh("matmul"), z = b.fresh("logits"), g = b.fresh("gate");
  b.node("MatMul", {b.input(1), b.tensor(s.param("weights"), "weights")}, {m});
  b.node("Add", {m, b.tensor(s.param("bias"), "bias")}, {z});
  b.node("Sigmoid", {z}, {g});
  b.node("Mul", {b.input(0), g}, {b.output()});
}

// a Constant or Param layer: its value as an initializer
void export_value(B& b) { b.node("Identity", {b.tensor(b.layer().compute(std::vector<Tensor>{}), "value")}, {b.output()}); }
void export_constant(B& b, const nn::ConstantAttributes&) { export_value(b); }
void export_param(B& b, const nn::ParamAttributes&) { export_value(b); }

// inference semantics: the identity
void export_dropout(B& b, const nn::DropoutAttributes&) { b.node("Identity", {b.input(0)}, {b.output()}); }

// One built-in exporter: a layer whose attributes are of type A (nn/attributes.h) is written by
// Write; false for a layer of another kind.
template <class A, void (*Write)(B&, const A&)>
bool by_attributes(B& b) {
  const A* a = nn::attributes_of<A>(b.layer());
  if (a) Write(b, *a);
  return a != nullptr;
}

// The built-in exporters, one per layer kind, each found by the type of the kind's attributes,
// never by the kind's name (a kind of one's own named "Residual" is not a Residual).
constexpr bool (*kBuiltins[])(B&) = {
    by_attributes<nn::LinearAttributes, export_linear>,
    by_attributes<nn::DropConnectAttributes, export_drop_connect>,
    by_attributes<nn::ConvAttributes, export_conv>,
    by_attributes<nn::ConvTransposeAttributes, export_conv_transpose>,
    by_attributes<nn::PoolAttributes, export_pool>,
    by_attributes<nn::GlobalPoolAttributes, export_global_pool>,
    by_attributes<nn::AdaptiveAvgPoolAttributes, export_adaptive_avg_pool>,
    by_attributes<nn::BatchNormOptions, export_batch_norm>,
    by_attributes<nn::LayerNormAttributes, export_layer_norm>,
    by_attributes<nn::RMSNormAttributes, export_rms_norm>,
    by_attributes<nn::SwiGLUAttributes, export_swiglu>,
    by_attributes<nn::ActivationAttributes, export_activation>,
    by_attributes<nn::DropoutAttributes, export_dropout>,
    by_attributes<nn::MergeAttributes, export_merge>,
    by_attributes<nn::ResidualAttributes, export_residual>,
    by_attributes<nn::GateAttributes, export_gate>,
    by_attributes<nn::ReshapeAttributes, export_reshape>,
    by_attributes<nn::TransposeAttributes, export_transpose>,
    by_attributes<nn::FlipAttributes, export_flip>,
    by_attributes<nn::AxisSliceAttributes, export_slice>,
    by_attributes<nn::LookupAttributes, export_lookup>,
    by_attributes<nn::PositionEmbeddingAttributes, export_position_embedding>,
    by_attributes<nn::OneHotAttributes, export_one_hot>,
    by_attributes<nn::ConstantAttributes, export_constant>,
    by_attributes<nn::ParamAttributes, export_param>,
    by_attributes<nn::RNNAttributes, export_rnn>,
    by_attributes<nn::CellAttributes, export_cell>,
    by_attributes<nn::AttentionAttributes, export_attention>,
    by_attributes<nn::TransformerEncoderAttributes, export_encoder>,
    by_attributes<nn::GptBlockAttributes, export_gpt_block>,
    by_attributes<nn::LlamaBlockAttributes, export_llama_block>,
};

}  // namespace

bool export_builtin(OnnxBuilder& b) {
  for (const auto write : kBuiltins)
    if (write(b)) return true;
  return false;
}

}  // namespace loom::io::detail
