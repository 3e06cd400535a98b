// ONNX export (loom/io/onnx.h, docs/onnx.md): each layer of a graph, in graph order, written as
// ONNX nodes by its exporter (a registered one for the layer's C++ type, else the built-in one
// of its kind, found by the kind's attributes type), the weights as initializers, opset 17.
#include "loom/io/onnx.h"

#include "io/onnx_proto.h"

#include <cmath>
#include <filesystem>
#include <cstring>
#include <map>
#include <mutex>
#include <typeindex>
#include <unordered_map>
#include <unordered_set>

#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/io/model.h"
#include "loom/graph/module.h"
#include "loom/nn/layers.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"

namespace loom::io {

namespace {

constexpr int64_t kOpset = 17;
constexpr int64_t kIrVersion = 8;

// ------------------------------------------------------------------------------- the registry
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::type_index, OnnxExporter>& registry() {
  static std::unordered_map<std::type_index, OnnxExporter> r;
  return r;
}

int32_t onnx_type(DType d, const std::string& who) {
  if (const auto t = detail::onnx_elem_type(d)) return *t;
  throw ValueError(who + ": dtype " + dtype_name(d) + " has no ONNX type here");
}

// The tensor's bytes, little-endian and contiguous, into `proto`.
void fill_tensor(onnx::TensorProto& proto, const std::string& name, const Tensor& t) {
  proto.set_name(name);
  proto.set_data_type(onnx_type(t.dtype(), "export_onnx: tensor '" + name + "'"));
  for (int64_t d : t.shape()) proto.add_dims(d);
  const Tensor c = t.detach().contiguous();  // raw data: little-endian, one byte per bool in both
  proto.set_raw_data(std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
}

void set_shape(onnx::ValueInfoProto& v, const std::string& name, DType dtype, const Shape& shape, bool batch_dim,
               const OnnxExportOptions& o, const std::string& who, bool name_dims) {
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(dtype, who));
  auto* sh = tt->mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    auto* d = sh->add_dim();
    if (i == 0 && batch_dim) {
      if (o.dynamic_batch) d->set_dim_param("batch");
      else d->set_dim_value(o.batch_size);
    } else if (shape[i] >= 0) {
      d->set_dim_value(shape[i]);
    } else if (name_dims) {
      d->set_dim_param(name + "_dim" + std::to_string(i));
    }
  }
}

// ------------------------------------------------------------------------------- the builder
class Builder final : public OnnxBuilder {
 public:
  Builder(onnx::GraphProto& g, std::unordered_map<const TensorImpl*, std::string> keys, const OnnxExportOptions& options)
      : g_(g), options_(options), keys_(std::move(keys)) {
    for (const auto& [t, k] : keys_) used_.insert(k);
  }

  // Starts the layer `l` whose inputs are the values `inputs`. Nodes and initializers of a layer
  // whose export fails are taken back (rollback()).
  void begin(const nn::Layer& l, std::vector<std::string> inputs, std::string output_name) {
    layer_ = l;
    output_ = std::move(output_name);
    inputs_ = std::move(inputs);
    nodes_mark_ = g_.node_size();
    inits_mark_ = g_.initializer_size();
    emitted_mark_ = emitted_order_.size();
    wrote_output_ = false;
  }
  void rollback() {
    while (g_.node_size() > nodes_mark_) g_.mutable_node()->RemoveLast();
    while (g_.initializer_size() > inits_mark_) g_.mutable_initializer()->RemoveLast();
    while (emitted_order_.size() > emitted_mark_) {
      emitted_.erase(emitted_order_.back());
      emitted_order_.pop_back();
    }
  }
  bool wrote_output() const { return wrote_output_; }

  const nn::Layer& layer() const override { return layer_; }
  std::string input(size_t i) const override {
    if (i >= inputs_.size())
      throw ValueError("input " + std::to_string(i) + " asked for; the layer has " + std::to_string(inputs_.size()));
    return inputs_[i];
  }
  std::string output() const override { return output_; }
  std::string fresh(const std::string& hint) override {
    std::string base = output_ + "/" + hint, name = base;
    for (int n = 1; used_.count(name); ++n) name = base + "_" + std::to_string(n);
    used_.insert(name);
    return name;
  }
  void node(const std::string& op_type, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<OnnxAttribute>& attributes) override {
    onnx::NodeProto* n = g_.add_node();
    n->set_op_type(op_type);
    n->set_name(fresh(op_type));
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) {
      n->add_output(o);
      if (o == output()) wrote_output_ = true;
    }
    for (const OnnxAttribute& a : attributes) {
      onnx::AttributeProto* p = n->add_attribute();
      p->set_name(a.name);
      std::visit(
          [p](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, int64_t>) {
              p->set_type(onnx::AttributeProto::INT);
              p->set_i(v);
            } else if constexpr (std::is_same_v<V, float>) {
              p->set_type(onnx::AttributeProto::FLOAT);
              p->set_f(v);
            } else if constexpr (std::is_same_v<V, std::string>) {
              p->set_type(onnx::AttributeProto::STRING);
              p->set_s(v);
            } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
              p->set_type(onnx::AttributeProto::INTS);
              for (int64_t x : v) p->add_ints(x);
            } else if constexpr (std::is_same_v<V, std::vector<float>>) {
              p->set_type(onnx::AttributeProto::FLOATS);
              for (float x : v) p->add_floats(x);
            } else {
              p->set_type(onnx::AttributeProto::STRINGS);
              for (const std::string& x : v) p->add_strings(x);
            }
          },
          a.value);
    }
  }
  std::string tensor(const Tensor& t, const std::string& hint) override {
    if (!t.defined()) throw ValueError("an undefined tensor as '" + hint + "'");
    if (auto it = keys_.find(t.impl().get()); it != keys_.end()) {
      if (!emitted_.count(it->second)) {
        fill_tensor(*g_.add_initializer(), it->second, t);
        emitted_.insert(it->second);
        emitted_order_.push_back(it->second);
      }
      return it->second;
    }
    const std::string name = fresh(hint);
    fill_tensor(*g_.add_initializer(), name, t);
    return name;
  }
  std::string ints(const std::vector<int64_t>& values, const std::string& hint) override {
    return tensor(from_vector(values, {static_cast<int64_t>(values.size())}), hint);
  }
  void reserve(const std::string& name) { used_.insert(name); }
  // One more input of the model (a SparseInput's dense form).
  void add_graph_input(const nn::Layer& l, const std::string& name) {
    set_shape(*g_.add_input(), name, l.dtype(), l.shape(), !l.shape().empty(), options_, "input '" + name + "'", true);
  }

 private:
  onnx::GraphProto& g_;
  const OnnxExportOptions& options_;
  std::unordered_map<const TensorImpl*, std::string> keys_;
  std::unordered_set<std::string> emitted_, used_;
  std::vector<std::string> emitted_order_;
  nn::Layer layer_;
  std::string output_;
  std::vector<std::string> inputs_;
  int nodes_mark_ = 0, inits_mark_ = 0;
  size_t emitted_mark_ = 0;
  bool wrote_output_ = false;
};

// ------------------------------------------------------------------------------- built-in kinds
using B = OnnxBuilder;

std::vector<int64_t> iota(int64_t from, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = from + i;
  return v;
}

// ONNX pads: all the begins, then all the ends.
std::vector<int64_t> onnx_pads(const std::vector<std::pair<int64_t, int64_t>>& p) {
  std::vector<int64_t> out;
  for (const auto& x : p) out.push_back(x.first);
  for (const auto& x : p) out.push_back(x.second);
  return out;
}

// Conv's (before, after) padding per spatial axis: the rule of nn/conv.cpp.
std::vector<std::pair<int64_t, int64_t>> conv_pads(const ConvPadding& p, const nn::ConvAttributes& a) {
  const size_t n = a.kernel_size.size();
  std::vector<std::pair<int64_t, int64_t>> out(n, {0, 0});
  if (p.mode() == "valid") return out;
  if (p.mode() == "same") {
    for (size_t i = 0; i < n; ++i) {
      const int64_t total = a.dilation[i] * (a.kernel_size[i] - 1);
      out[i] = {total / 2, total - total / 2};
    }
    return out;
  }
  const auto& v = p.values();
  if (v.size() == 1) return std::vector<std::pair<int64_t, int64_t>>(n, {v[0], v[0]});
  if (v.size() == n) {
    for (size_t i = 0; i < n; ++i) out[i] = {v[i], v[i]};
    return out;
  }
  if (v.size() == 2 * n) {
    for (size_t i = 0; i < n; ++i) out[i] = {v[2 * i], v[2 * i + 1]};
    return out;
  }
  throw ValueError("padding with " + std::to_string(v.size()) + " values");
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
          {"pads", onnx_pads(conv_pads(a.padding, a))}});
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

void export_global_pool(B& b) {
  const bool max = b.layer().options().get_string("mode") == "max";
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

// opset 17 has no RMSNormalization (opset 23 does): x / sqrt(mean(x^2) + eps) * weight over the last axis
void export_rms_norm(B& b, const nn::RMSNormAttributes& a) {
  const std::string sq = b.fresh("rms_square"), ms = b.fresh("rms_mean"), eps = b.fresh("rms_plus_eps"), r = b.fresh("rms_root"),
                    n = b.fresh("rms_normalized");
  b.node("Mul", {b.input(0), b.input(0)}, {sq});
  b.node("ReduceMean", {sq}, {ms}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}});
  b.node("Add", {ms, b.tensor(scalar_tensor(a.eps, b.layer().dtype()), "eps")}, {eps});
  b.node("Sqrt", {eps}, {r});
  b.node("Div", {b.input(0), r}, {n});
  b.node("Mul", {n, b.tensor(b.layer().state().param("weight"), "weight")}, {b.output()});
}

// down(silu(x gate) * (x up)) as MatMuls
void export_swiglu(B& b, const nn::SwiGLUAttributes&) {
  nn::State& s = b.layer().state();
  const std::string g = b.fresh("swiglu_gate"), sg = b.fresh("swiglu_sigmoid"), a = b.fresh("swiglu_silu"), u = b.fresh("swiglu_up"),
                    h = b.fresh("swiglu_gated");
  b.node("MatMul", {b.input(0), b.tensor(s.param("gate"), "gate")}, {g});
  b.node("Sigmoid", {g}, {sg});
  b.node("Mul", {g, sg}, {a});
  b.node("MatMul", {b.input(0), b.tensor(s.param("up"), "up")}, {u});
  b.node("Mul", {a, u}, {h});
  b.node("MatMul", {h, b.tensor(s.param("down"), "down")}, {b.output()});
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

void export_one_hot(B& b, const nn::OneHotAttributes& a) {
  const Tensor values = astype(from_vector<float>({0.0f, 1.0f}, {2}), a.dtype);
  b.node("OneHot", {b.input(0), b.ints({a.n_classes}, "depth"), b.tensor(values, "values")}, {b.output()}, {{"axis", int64_t{-1}}});
}

void export_residual(B& b) {
  nn::State& s = b.layer().state();
  if (!s.has_param("projection")) return b.node("Add", {b.input(0), b.input(1)}, {b.output()});
  const std::string p = b.fresh("projected");
  b.node("MatMul", {b.input(0), b.tensor(s.param("projection"), "projection")}, {p});
  b.node("Add", {p, b.input(1)}, {b.output()});
}

void export_gate(B& b) {
  nn::State& s = b.layer().state();
  const std::string m = b.fresh("matmul"), z = b.fresh("logits"), g = b.fresh("gate");
  b.node("MatMul", {b.input(1), b.tensor(s.param("weights"), "weights")}, {m});
  b.node("Add", {m, b.tensor(s.param("bias"), "bias")}, {z});
  b.node("Sigmoid", {z}, {g});
  b.node("Mul", {b.input(0), g}, {b.output()});
}

// ONNX's gate blocks from Loom's (PyTorch's) along the last axis: `order` lists Loom's block of
// each ONNX block.
Tensor reorder_gates(const Tensor& w, const std::vector<int64_t>& order, int64_t n) {
  std::vector<Tensor> parts;
  for (int64_t g : order) parts.push_back(slice(w, -1, g * n, (g + 1) * n));
  return concatenate(parts, -1);
}

// RNN over (batch, time, features): ONNX's RNN / LSTM / GRU in its time-major layout (layout 0,
// the one ONNX Runtime runs), the input and outputs transposed around it. W (dirs, G n, in),
// R (dirs, G n, n), B (dirs, 2 G n) with ONNX's gate orders: LSTM i o f c, GRU z r h
// (linear_before_reset: PyTorch's GRU).
void export_rnn(B& b, const nn::RNNAttributes& a) {
  if (a.stateful) throw ValueError("a stateful RNN (its state kept between calls) has no ONNX form here");
  if (a.bidirectional && a.reverse) throw ValueError("a reversed bidirectional RNN has no ONNX form here");
  const int64_t n = a.n_units;
  std::string op;
  std::vector<int64_t> order;
  std::vector<OnnxAttribute> attrs{{"hidden_size", n},
                                   {"direction", std::string(a.bidirectional ? "bidirectional" : a.reverse ? "reverse" : "forward")}};
  if (a.cell == "LSTM") {
    op = "LSTM";
    order = {0, 3, 1, 2};
  } else if (a.cell == "GRU") {
    op = "GRU";
    order = {1, 0, 2};
    attrs.push_back({"linear_before_reset", int64_t{1}});
  } else {
    op = "RNN";
    order = {0};
    const char* act = a.activation.is(nn::tanh) ? "Tanh" : a.activation.is(nn::relu) ? "Relu" : a.activation.is(nn::sigmoid) ? "Sigmoid" : nullptr;
    if (!act) throw ValueError("an RNN cell with activation '" + a.activation.name + "' has no ONNX form (tanh, relu, sigmoid do)");
    const size_t dirs = a.bidirectional ? 2 : 1;
    attrs.push_back({"activations", std::vector<std::string>(dirs, act)});
  }
  const nn::State& st = b.layer().state();
  std::vector<const nn::State*> dirs;
  if (a.bidirectional)
    for (const auto& c : st.children()) dirs.push_back(c.second.get());
  else
    dirs.push_back(&st);
  std::vector<Tensor> ws, rs, bs;
  for (const nn::State* s : dirs) {
    ws.push_back(expand_dims(reorder_gates(s->param("w_ih"), order, n).transpose(), 0));
    rs.push_back(expand_dims(reorder_gates(s->param("w_hh"), order, n).transpose(), 0));
    if (a.bias) bs.push_back(expand_dims(concatenate({reorder_gates(s->param("b_ih"), order, n), reorder_gates(s->param("b_hh"), order, n)}, 0), 0));
  }
  const std::string x = b.fresh("time_major");
  b.node("Transpose", {b.input(0)}, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  std::vector<std::string> in{x, b.tensor(concatenate(ws, 0), "W"), b.tensor(concatenate(rs, 0), "R")};
  if (a.bias) in.push_back(b.tensor(concatenate(bs, 0), "B"));
  if (a.return_sequences) {
    const std::string y = b.fresh("Y"), yt = b.fresh("Y_batch_major");  // (time, dirs, batch, n) -> (batch, time, dirs, n)
    b.node(op, in, {y}, attrs);
    b.node("Transpose", {y}, {yt}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
    b.node("Reshape", {yt, b.ints({0, 0, -1}, "shape")}, {b.output()});
  } else {
    const std::string yh = b.fresh("Y_h"), yt = b.fresh("Y_h_batch_major");  // (dirs, batch, n) -> (batch, dirs, n)
    b.node(op, in, {"", yh}, attrs);
    b.node("Transpose", {yh}, {yt}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    b.node("Reshape", {yt, b.ints({0, -1}, "shape")}, {b.output()});
  }
}

// ------------------------------------------------------------------ attention
// x W + b (b optional) into a fresh value
std::string affine(B& b, const std::string& x, const nn::State& s, const char* w, const char* bias, const std::string& tag) {
  const std::string y = b.fresh(tag);
  b.node("MatMul", {x, b.tensor(s.param(w), w)}, {y});
  if (!s.has_param(bias)) return y;
  const std::string z = b.fresh(tag + "_biased");
  b.node("Add", {y, b.tensor(s.param(bias), bias)}, {z});
  return z;
}

// (N, L, E) -> (N, H, L, E / H)
std::string split_heads(B& b, const std::string& x, int64_t heads, int64_t e, const std::string& tag) {
  const std::string r = b.fresh(tag + "_heads"), t = b.fresh(tag + "_heads_t");
  b.node("Reshape", {x, b.ints({0, 0, heads, e / heads}, "heads_shape")}, {r});
  b.node("Transpose", {r}, {t}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  return t;
}

// (N, Hkv, S, d) -> (N, Hkv * group, S, d), each head repeated over its group of query heads
// (grouped-query attention; torch's repeat_interleave): Unsqueeze, Expand, Reshape.
std::string repeat_heads(B& b, const std::string& x, int64_t kv_heads, int64_t group, int64_t d, const std::string& tag) {
  if (group == 1) return x;
  const std::string u = b.fresh(tag + "_grouped"), e = b.fresh(tag + "_expanded"), r = b.fresh(tag + "_repeated");
  b.node("Unsqueeze", {x, b.ints({2}, "axis2")}, {u});  // (N, Hkv, 1, S, d)
  b.node("Expand", {u, b.ints({1, 1, group, 1, 1}, "group_shape")}, {e});
  b.node("Reshape", {e, b.ints({0, kv_heads * group, -1, d}, "repeated_shape")}, {r});
  return r;
}

// Loom's attend (nn/attention.cpp) on values q (N, L, E), k and v (N, S, E); `keep` (N, S) bool
// or empty. Scores are scaled by 1 / sqrt(E / H); masked scores are -inf before the softmax.
// kv_heads < heads: grouped-query attention (k and v projected to kv_heads heads).
void attend(B& b, const nn::State& s, const std::string& q, const std::string& k, const std::string& v, int64_t heads, bool causal,
            const std::string& keep, const std::string& out, int64_t kv_heads = 0) {
  const int64_t e = s.param("q_weight").shape()[0], d = e / heads;
  if (kv_heads <= 0) kv_heads = heads;
  const int64_t group = heads / kv_heads;
  const std::string qh = split_heads(b, affine(b, q, s, "q_weight", "q_bias", "q"), heads, e, "q");
  const std::string kh = repeat_heads(b, split_heads(b, affine(b, k, s, "k_weight", "k_bias", "k"), kv_heads, d * kv_heads, "k"),
                                      kv_heads, group, d, "k");
  const std::string vh = repeat_heads(b, split_heads(b, affine(b, v, s, "v_weight", "v_bias", "v"), kv_heads, d * kv_heads, "v"),
                                      kv_heads, group, d, "v");
  const std::string kt = b.fresh("k_t"), raw = b.fresh("scores_raw");
  b.node("Transpose", {kh}, {kt}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  b.node("MatMul", {qh, kt}, {raw});
  std::string scores = b.fresh("scores");
  b.node("Mul", {raw, b.tensor(scalar_tensor(1.0 / std::sqrt(static_cast<double>(d)), b.layer().dtype()), "scale")}, {scores});
  const std::string minus_inf = b.tensor(scalar_tensor(-INFINITY, b.layer().dtype()), "minus_inf");
  if (causal) {  // key j > query i is masked
    const std::string lq = b.fresh("len_q"), lk = b.fresh("len_k"), lq0 = b.fresh("len_q0"), lk0 = b.fresh("len_k0"), rows = b.fresh("rows"),
                      cols = b.fresh("cols"), rows2 = b.fresh("rows_col"), future = b.fresh("future"), masked = b.fresh("scores_causal");
    const std::string zero = b.tensor(scalar_tensor(int64_t{0}, DType::Int64), "zero"), one = b.tensor(scalar_tensor(int64_t{1}, DType::Int64), "one");
    b.node("Shape", {q}, {lq}, {{"start", int64_t{1}}, {"end", int64_t{2}}});
    b.node("Shape", {k}, {lk}, {{"start", int64_t{1}}, {"end", int64_t{2}}});
    b.node("Squeeze", {lq, b.ints({0}, "axis0")}, {lq0});
    b.node("Squeeze", {lk, b.ints({0}, "axis0")}, {lk0});
    b.node("Range", {zero, lq0, one}, {rows});
    b.node("Range", {zero, lk0, one}, {cols});
    b.node("Unsqueeze", {rows, b.ints({1}, "axis1")}, {rows2});
    b.node("Greater", {cols, rows2}, {future});  // (L, S)
    b.node("Where", {future, minus_inf, scores}, {masked});
    scores = masked;
  }
  if (!keep.empty()) {
    const std::string kb = b.fresh("keep_bool"), k4 = b.fresh("keep_4d"), drop = b.fresh("padding"), masked = b.fresh("scores_padded");
    b.node("Cast", {keep}, {kb}, {{"to", int64_t{onnx::TensorProto::BOOL}}});
    b.node("Unsqueeze", {kb, b.ints({1, 2}, "axes12")}, {k4});  // (N, 1, 1, S)
    b.node("Not", {k4}, {drop});
    b.node("Where", {drop, minus_inf, scores}, {masked});
    scores = masked;
  }
  const std::string p = b.fresh("weights"), o = b.fresh("attended"), ot = b.fresh("attended_t"), oc = b.fresh("attended_concat");
  b.node("Softmax", {scores}, {p}, {{"axis", int64_t{-1}}});
  b.node("MatMul", {p, vh}, {o});
  b.node("Transpose", {o}, {ot}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  b.node("Reshape", {ot, b.ints({0, 0, e}, "concat_shape")}, {oc});
  const std::string y = b.fresh("out");
  b.node("MatMul", {oc, b.tensor(s.param("out_weight"), "out_weight")}, {s.has_param("out_bias") ? y : out});
  if (s.has_param("out_bias")) b.node("Add", {y, b.tensor(s.param("out_bias"), "out_bias")}, {out});
}

void export_attention(B& b, const nn::AttentionAttributes& a) {
  if (a.rotary) throw ValueError("a rotary position embedding is not exported (opset 17 has no form of it here)");
  const std::string keep = b.layer().inputs().size() > 3 ? b.input(3) : "";
  attend(b, b.layer().state(), b.input(0), b.input(1), b.input(2), a.n_heads, a.causal, keep, b.output(), a.n_kv_heads);
}

const nn::State& child_state(const nn::State& s, const std::string& name) {
  for (const auto& [k, c] : s.children())
    if (k == name) return *c;
  throw ValueError("no inner state '" + name + "'");
}

std::string layer_norm_value(B& b, const std::string& x, const nn::State& n, double eps, const std::string& tag, const std::string& out = "") {
  const std::string y = out.empty() ? b.fresh(tag) : out;
  b.node("LayerNormalization", {x, b.tensor(n.param("weight"), tag + "_weight"), b.tensor(n.param("bias"), tag + "_bias")}, {y},
         {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(eps)}});
  return y;
}

// torch.nn.TransformerEncoderLayer's computation in Eval mode (dropout the identity)
void export_encoder(B& b, const nn::TransformerEncoderAttributes& a) {
  const nn::State& s = b.layer().state();
  const nn::State &att = child_state(s, "self_attention"), &ff = child_state(s, "ff"), &n1 = child_state(s, "norm1"), &n2 = child_state(s, "norm2");
  const std::string keep = b.layer().inputs().size() > 1 ? b.input(1) : "";
  const auto feed_forward = [&](const std::string& x) {
    const std::string h = affine(b, x, ff, "w1", "b1", "ff1"), act = b.fresh("ff_act");
    if (!activation(b, a.activation, h, act)) throw ValueError("the activation function '" + a.activation.name + "' has no ONNX form");
    return affine(b, act, ff, "w2", "b2", "ff2");
  };
  const auto add = [&](const std::string& x, const std::string& y, const std::string& tag) {
    const std::string z = b.fresh(tag);
    b.node("Add", {x, y}, {z});
    return z;
  };
  const std::string x = b.input(0);
  if (a.norm_first) {
    const std::string h1 = layer_norm_value(b, x, n1, a.eps, "norm1"), at = b.fresh("attention");
    attend(b, att, h1, h1, h1, a.n_heads, a.causal, keep, at);
    const std::string x1 = add(x, at, "residual1");
    b.node("Add", {x1, feed_forward(layer_norm_value(b, x1, n2, a.eps, "norm2"))}, {b.output()});
    return;
  }
  const std::string at = b.fresh("attention");
  attend(b, att, x, x, x, a.n_heads, a.causal, keep, at);
  const std::string x1 = layer_norm_value(b, add(x, at, "residual1"), n1, a.eps, "norm1");
  layer_norm_value(b, add(x1, feed_forward(x1), "residual2"), n2, a.eps, "norm2", b.output());
}

// a Constant or Param layer: its value as an initializer
void export_constant(B& b) {
  b.node("Identity", {b.tensor(b.layer().compute(std::vector<Tensor>{}), "value")}, {b.output()});
}

// x[..., start:end] into a fresh value
std::string last_axis_slice(B& b, const std::string& x, int64_t start, int64_t end, const std::string& tag) {
  const std::string y = b.fresh(tag);
  b.node("Slice", {x, b.ints({start}, tag + "_start"), b.ints({end}, tag + "_end"), b.ints({-1}, "last_axis")}, {y});
  return y;
}

std::string binary(B& b, const char* op, const std::string& x, const std::string& y, const std::string& tag) {
  const std::string z = b.fresh(tag);
  b.node(op, {x, y}, {z});
  return z;
}

std::string unary(B& b, const char* op, const std::string& x, const std::string& tag) {
  const std::string z = b.fresh(tag);
  b.node(op, {x}, {z});
  return z;
}

// One step of an RNNCell, LSTMCell or GRUCell (nn/recurrent.cpp's cell_step on
// input_projection): inputs x and the state (h, or [h, c] packed), output the next state.
void export_cell(B& b, const nn::CellAttributes& a) {
  const std::string kind = b.layer().kind();
  const nn::State& s = b.layer().state();
  const int64_t n = a.n_units;
  const bool bias = s.has_param("b_ih");
  const std::string x = b.input(0), st = b.input(1);
  std::string xw = binary(b, "MatMul", x, b.tensor(s.param("w_ih"), "w_ih"), "xw");
  if (kind == "LSTMCell") {
    if (bias) xw = binary(b, "Add", xw, b.tensor(s.param("b_ih"), "b_ih"), "xw_b");
    if (bias) xw = binary(b, "Add", xw, b.tensor(s.param("b_hh"), "b_hh"), "xw_bb");
    const std::string h = last_axis_slice(b, st, 0, n, "h"), c = last_axis_slice(b, st, n, 2 * n, "c");
    const std::string g = binary(b, "Add", xw, binary(b, "MatMul", h, b.tensor(s.param("w_hh"), "w_hh"), "hw"), "gates");
    const std::string i = unary(b, "Sigmoid", last_axis_slice(b, g, 0, n, "gate_i"), "i"), f = unary(b, "Sigmoid", last_axis_slice(b, g, n, 2 * n, "gate_f"), "f"),
                      cand = unary(b, "Tanh", last_axis_slice(b, g, 2 * n, 3 * n, "gate_g"), "g"),
                      o = unary(b, "Sigmoid", last_axis_slice(b, g, 3 * n, 4 * n, "gate_o"), "o");
    const std::string c2 = binary(b, "Add", binary(b, "Mul", f, c, "fc"), binary(b, "Mul", i, cand, "ig"), "c2");
    const std::string h2 = binary(b, "Mul", o, unary(b, "Tanh", c2, "tanh_c2"), "h2");
    // h2 and c2 may broadcast to different leading sizes than the packed state had: Concat needs one
    b.node("Concat", {h2, c2}, {b.output()}, {{"axis", int64_t{-1}}});
    return;
  }
  if (bias) xw = binary(b, "Add", xw, b.tensor(s.param("b_ih"), "b_ih"), "xw_b");
  std::string hw = binary(b, "MatMul", st, b.tensor(s.param("w_hh"), "w_hh"), "hw");
  if (bias) hw = binary(b, "Add", hw, b.tensor(s.param("b_hh"), "b_hh"), "hw_b");
  if (kind == "RNNCell") {
    if (!activation(b, a.activation, binary(b, "Add", xw, hw, "pre"), b.output()))
      throw ValueError("the activation function '" + a.activation.name + "' has no ONNX form");
    return;
  }
  const std::string r = unary(b, "Sigmoid", binary(b, "Add", last_axis_slice(b, xw, 0, n, "xr"), last_axis_slice(b, hw, 0, n, "hr"), "r_pre"), "r");
  const std::string z = unary(b, "Sigmoid", binary(b, "Add", last_axis_slice(b, xw, n, 2 * n, "xz"), last_axis_slice(b, hw, n, 2 * n, "hz"), "z_pre"), "z");
  const std::string cand = unary(
      b, "Tanh", binary(b, "Add", last_axis_slice(b, xw, 2 * n, 3 * n, "xn"), binary(b, "Mul", r, last_axis_slice(b, hw, 2 * n, 3 * n, "hn"), "r_hn"), "n_pre"),
      "cand");
  // (1 - z) * cand + z * h = cand + z * (h - cand)
  b.node("Add", {cand, binary(b, "Mul", z, binary(b, "Sub", st, cand, "h_minus_cand"), "z_delta")}, {b.output()});
}

template <class A, class F>
bool try_kind(B& b, F&& f) {
  if (const A* a = nn::attributes_of<A>(b.layer())) {
    f(b, *a);
    return true;
  }
  return false;
}

// The built-in exporter of the layer's kind, by its attributes type (kinds without a typed
// attributes struct by their kind); false when there is none.
bool export_builtin(B& b) {
  if (try_kind<nn::LinearAttributes>(b, export_linear) || try_kind<nn::ConvAttributes>(b, export_conv) ||
      try_kind<nn::ConvTransposeAttributes>(b, export_conv_transpose) || try_kind<nn::PoolAttributes>(b, export_pool) ||
      try_kind<nn::AdaptiveAvgPoolAttributes>(b, export_adaptive_avg_pool) ||
      try_kind<nn::BatchNormOptions>(b, export_batch_norm) || try_kind<nn::LayerNormAttributes>(b, export_layer_norm) ||
      try_kind<nn::RMSNormAttributes>(b, export_rms_norm) || try_kind<nn::SwiGLUAttributes>(b, export_swiglu) ||
      try_kind<nn::ActivationAttributes>(b, export_activation) || try_kind<nn::MergeAttributes>(b, export_merge) ||
      try_kind<nn::ReshapeAttributes>(b, export_reshape) || try_kind<nn::TransposeAttributes>(b, export_transpose) ||
      try_kind<nn::FlipAttributes>(b, export_flip) || try_kind<nn::AxisSliceAttributes>(b, export_slice) || try_kind<nn::LookupAttributes>(b, export_lookup) ||
      try_kind<nn::OneHotAttributes>(b, export_one_hot) || try_kind<nn::RNNAttributes>(b, export_rnn) || try_kind<nn::CellAttributes>(b, export_cell) ||
      try_kind<nn::DropConnectAttributes>(b, export_drop_connect) ||
      try_kind<nn::AttentionAttributes>(b, export_attention) || try_kind<nn::TransformerEncoderAttributes>(b, export_encoder))
    return true;
  if (try_kind<nn::DropoutAttributes>(b, [](B& bb, const nn::DropoutAttributes&) { bb.node("Identity", {bb.input(0)}, {bb.output()}); }))
    return true;
  const std::string kind = b.layer().kind();
  if (kind == "GlobalPool") return export_global_pool(b), true;
  if (kind == "Residual") return export_residual(b), true;
  if (kind == "Gate") return export_gate(b), true;
  if (kind == "Constant" || kind == "Param") return export_constant(b), true;
  return false;
}

OnnxExporter registered(const nn::Layer& l) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const nn::LayerImpl& impl = *l.impl();
  auto it = registry().find(std::type_index(typeid(impl)));
  return it == registry().end() ? OnnxExporter() : it->second;
}

// ------------------------------------------------------------------ batch norm folding
// The BatchNorm layers whose input is a Conv1D/Conv2D or a Linear on (batch, units) read by
// nothing else (and not an output, not exported by a registered exporter): each maps to that
// layer, which is then written with the batch norm folded into its weights and bias.
std::unordered_map<const nn::LayerImpl*, nn::Layer> foldable_batch_norms(const Graph& graph) {
  std::unordered_map<const nn::LayerImpl*, int> readers;
  for (const nn::Layer& n : graph.nodes())
    for (const nn::Layer& i : n.node().inputs()) ++readers[i.node().impl().get()];
  for (const nn::Layer& o : graph.outputs()) ++readers[o.node().impl().get()];
  std::unordered_set<const nn::LayerImpl*> inputs;
  for (const nn::Layer& i : graph.inputs()) inputs.insert(i.node().impl().get());
  std::unordered_map<const nn::LayerImpl*, nn::Layer> out;
  for (const nn::Layer& n : graph.nodes()) {
    const nn::Layer bn = n.node();
    if (!nn::attributes_of<nn::BatchNormOptions>(bn) || bn.inputs().size() != 1) continue;
    const nn::Layer c = bn.inputs()[0].node();
    if (inputs.count(c.impl().get()) || readers[c.impl().get()] != 1 || registered(c) || c.dtype() != bn.dtype()) continue;
    bool ok = nn::attributes_of<nn::ConvAttributes>(c) != nullptr;
    if (const auto* la = nn::attributes_of<nn::LinearAttributes>(c))
      ok = !la->transpose_weights && c.shape().size() == 2;
    if (ok) out.emplace(bn.impl().get(), c);
  }
  return out;
}

// `c` (a Conv or a Linear) followed by the batch norm being exported, as one Conv / MatMul + Add:
// with s = gamma / sqrt(var + eps), W' = W s (per output channel), b' = (b - mean) s + beta;
// computed in float64.
void export_folded(B& b, const nn::Layer& c, const nn::BatchNormOptions& o) {
  nn::State& bs = b.layer().state();
  const Tensor mean = astype(bs.buffer("running_mean"), DType::Float64), var = astype(bs.buffer("running_var"), DType::Float64);
  Tensor scale = rsqrt(var + o.eps), shift = zeros(mean.shape(), DType::Float64);
  if (o.affine) {
    scale = scale * astype(bs.param("weight"), DType::Float64);
    shift = astype(bs.param("bias"), DType::Float64);
  }
  nn::State& cs = c.state();
  const Tensor w = astype(cs.param("weights"), DType::Float64);
  Tensor bias = cs.has_param("bias") ? astype(cs.param("bias"), DType::Float64) : zeros(mean.shape(), DType::Float64);
  bias = (bias - mean) * scale + shift;
  const DType dt = c.dtype();
  if (const nn::ConvAttributes* a = nn::attributes_of<nn::ConvAttributes>(c)) {
    Shape per_filter(static_cast<size_t>(w.ndim()), 1);
    per_filter[0] = w.shape()[0];
    const Tensor wf = astype(w * reshape(scale, per_filter), dt);
    b.node("Conv", {b.input(0), b.tensor(wf, "folded_weights"), b.tensor(astype(bias, dt), "folded_bias")}, {b.output()},
           {{"kernel_shape", a->kernel_size}, {"strides", a->stride}, {"dilations", a->dilation}, {"group", a->groups},
            {"pads", onnx_pads(conv_pads(a->padding, *a))}});
    return;
  }
  const std::string y = b.fresh("matmul");
  b.node("MatMul", {b.input(0), b.tensor(astype(w * scale, dt), "folded_weights")}, {y});
  b.node("Add", {y, b.tensor(astype(bias, dt), "folded_bias")}, {b.output()});
}

using Values = std::unordered_map<const nn::LayerImpl*, std::string>;

// Exports the layers of `graph` whose values are not in `value` yet (its inputs' are), each
// layer's value named prefix + its name. A Module's inner graph is inlined, its layers' values
// under "<module>/"; the module's value is its first output's, a ModuleOutput's the one it reads.
void export_nodes(const Graph& graph, const std::string& prefix, Values& value,
                  std::unordered_map<const nn::LayerImpl*, std::vector<std::string>>& module_outputs, Builder& b,
                  std::vector<std::string>& failures, bool fold) {
  std::unordered_map<const nn::LayerImpl*, nn::Layer> folds;  // batch norm -> the layer folded into it
  std::unordered_set<const nn::LayerImpl*> folded;
  if (fold)
    for (const auto& [bn, c] : foldable_batch_norms(graph)) {
      folds.emplace(bn, c);
      folded.insert(c.impl().get());
    }
  const auto values_of = [&](const nn::Layer& l) {
    std::vector<std::string> ins;
    for (const nn::Layer& i : l.inputs()) {
      auto it = value.find(i.node().impl().get());
      ins.push_back(it == value.end() ? prefix + i.node().name() : it->second);
    }
    return ins;
  };
  for (const nn::Layer& node : graph.nodes()) {
    const nn::Layer l = node.node();
    if (value.count(l.impl().get())) continue;  // an input
    const std::vector<std::string> ins = values_of(l);
    const std::string name = prefix + l.name();
    value[l.impl().get()] = name;
    if (folded.count(l.impl().get())) continue;  // written with the batch norm that reads it
    const std::string who = name + " (" + l.kind() + ")";
    if (nn::attributes_of<nn::SparseInputAttributes>(l)) {  // a model input taking the dense rows
      if (!prefix.empty()) failures.push_back(who + ": a SparseInput inside a module is not exported");
      else b.add_graph_input(l, name);
      continue;
    }
    b.begin(l, ins, name);
    try {
      if (auto f = folds.find(l.impl().get()); f != folds.end()) {
        const nn::Layer& c = f->second;
        b.begin(l, values_of(c), name);  // the folded layer's inputs
        export_folded(b, c, *nn::attributes_of<nn::BatchNormOptions>(l));
        continue;
      }
      if (const Graph* inner = nn::module_graph(l)) {
        Values inner_value;  // per module layer: a reuse_with of a module may share the inner graph
        if (inner->inputs().size() != ins.size())
          throw ValueError("its graph takes " + std::to_string(inner->inputs().size()) + " inputs, the layer has " + std::to_string(ins.size()));
        for (size_t k = 0; k < ins.size(); ++k) inner_value[inner->inputs()[k].node().impl().get()] = ins[k];
        export_nodes(*inner, name + "/", inner_value, module_outputs, b, failures, fold);
        std::vector<std::string>& outs = module_outputs[l.impl().get()];
        for (const nn::Layer& o : inner->outputs()) outs.push_back(inner_value.at(o.node().impl().get()));
        b.begin(l, ins, name);
        b.node("Identity", {outs.at(0)}, {name}, {});
        continue;
      }
      if (std::string(l.kind()) == "ModuleOutput") {
        auto it = module_outputs.find(l.inputs().at(0).node().impl().get());
        if (it == module_outputs.end()) throw ValueError("its module was not exported");
        b.node("Identity", {it->second.at(l.impl()->reads_output())}, {name}, {});
        continue;
      }
      bool done = false;
      if (OnnxExporter f = registered(l)) {
        f(b);
        done = true;
      } else {
        done = export_builtin(b);
      }
      if (!done) {
        failures.push_back(who + ": no ONNX exporter for this kind");
        b.rollback();
      } else if (!b.wrote_output()) {
        failures.push_back(who + ": its exporter wrote no node with the layer's output '" + name + "'");
        b.rollback();
      }
    } catch (const std::exception& ex) {
      failures.push_back(who + ": " + ex.what());
      b.rollback();
    }
  }
}

struct Encoded {
  onnx::ModelProto model;
  std::vector<std::string> failures;
};

Encoded encode(const Graph& graph, const OnnxExportOptions& o) {
  Encoded e;
  onnx::ModelProto& m = e.model;
  m.set_ir_version(kIrVersion);
  m.set_producer_name(o.producer_name);
  if (!o.doc_string.empty()) m.set_doc_string(o.doc_string);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name(graph.outputs().empty() ? "loom" : graph.outputs()[0].name());

  std::unordered_map<const TensorImpl*, std::string> keys;
  for (const auto& [k, t] : graph_state(graph)) keys.emplace(t.impl().get(), k);
  Builder b(g, std::move(keys), o);

  std::unordered_map<const nn::LayerImpl*, std::string> value;  // the value each layer's output is
  std::unordered_set<const nn::LayerImpl*> is_input;
  for (const nn::Layer& in : graph.inputs()) {
    const nn::Layer l = in.node();
    is_input.insert(l.impl().get());
    value[l.impl().get()] = l.name();
    b.reserve(l.name());
    set_shape(*g.add_input(), l.name(), l.dtype(), l.shape(), !l.shape().empty(), o, "input '" + l.name() + "'", true);
  }
  for (const nn::Layer& n : graph.nodes()) b.reserve(n.name());
  std::unordered_map<const nn::LayerImpl*, std::vector<std::string>> module_outputs;
  export_nodes(graph, "", value, module_outputs, b, e.failures, o.fold_batch_norm);
  for (const nn::Layer& out : graph.outputs()) {
    const nn::Layer l = out.node();
    set_shape(*g.add_output(), l.name(), l.dtype(), l.shape(), !l.shape().empty() && l.shape()[0] < 0, o, "output '" + l.name() + "'",
              false);
  }
  return e;
}

}  // namespace

void register_onnx_exporter(const std::type_info& kind, OnnxExporter exporter) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (exporter) registry()[std::type_index(kind)] = std::move(exporter);
  else registry().erase(std::type_index(kind));
}

std::vector<std::string> onnx_unexportable(const Graph& graph) { return encode(graph, {}).failures; }

namespace {

// protobuf refuses to serialize messages of 2 GB and more
constexpr size_t kProtobufLimit = (size_t{1} << 31) - (size_t{1} << 20);
// tensors smaller than this stay in the model file when the weights go to a file of their own
constexpr size_t kExternalMinBytes = 1024;

Encoded encode_or_throw(const Graph& graph, const OnnxExportOptions& options) {
  Encoded e = encode(graph, options);
  if (!e.failures.empty()) {
    std::string msg = "export_onnx: " + std::to_string(e.failures.size()) + " layer" + (e.failures.size() == 1 ? "" : "s") +
                      " cannot be exported:";
    for (const std::string& f : e.failures) msg += "\n  " + f;
    throw ValueError(msg);
  }
  return e;
}

std::string serialize(const onnx::ModelProto& m) {
  if (m.ByteSizeLong() >= kProtobufLimit)
    throw IOError("export_onnx: the model is " + std::to_string(m.ByteSizeLong()) +
                  " bytes, past protobuf's 2 GB limit (export_onnx writes its weights to a file of their own)");
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw IOError("export_onnx: the model could not be serialized");
  return bytes;
}

}  // namespace

std::string encode_onnx(const Graph& graph, const OnnxExportOptions& options) { return serialize(encode_or_throw(graph, options).model); }

void export_onnx(const Graph& graph, const std::string& path, const OnnxExportOptions& options) {
  Encoded e = encode_or_throw(graph, options);
  onnx::ModelProto& m = e.model;
  const int64_t threshold = std::min<int64_t>(options.external_data_threshold, static_cast<int64_t>(kProtobufLimit));
  if (options.external_data || static_cast<int64_t>(m.ByteSizeLong()) >= threshold) {
    // the initializers' bytes into "<file>.data", named relative to the model's folder
    const std::string location = std::filesystem::path(path).filename().string() + ".data";
    std::string data;
    for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
      // small tensors (shapes, axes: what shape inference reads) stay inside, as onnx.save does
      if (!t.has_raw_data() || t.raw_data().size() < kExternalMinBytes) continue;
      data.resize((data.size() + 63) / 64 * 64, '\0');
      const size_t offset = data.size(), length = t.raw_data().size();
      data += t.raw_data();
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (const auto& [k, v] : {std::pair<const char*, std::string>{"location", location}, {"offset", std::to_string(offset)},
                                  {"length", std::to_string(length)}}) {
        auto* entry = t.add_external_data();
        entry->set_key(k);
        entry->set_value(v);
      }
    }
    const std::string bytes = serialize(m);
    write_file_atomic(path + ".data", data);
    write_file_atomic(path, bytes);
    return;
  }
  write_file_atomic(path, serialize(m));
}

}  // namespace loom::io
