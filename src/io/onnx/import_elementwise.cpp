// ONNX import, elementwise operators (importer.h): activations, Clip, Dropout, Identity, Constant,
// the merges (Add, Sub, Mul, Sum, Mean) and gelu's formula written out with Erf (Mul or Div, Erf,
// Add, Mul, Mul), as Activation, Dropout and merge layers.
#include "io/onnx/importer.h"

#include <cmath>
#include <limits>
#include <optional>

#include "loom/core/error.h"
#include "loom/ops/creation.h"

namespace loom::io::detail {

void Importer::import_constant() {
  single_output();
  const auto* v = attr("value");
  if (!v || node_->attribute_size() != 1) throw Unsupported("only the 'value' attribute (a tensor) is imported");
  Tensor t = detail::to_tensor(v->t(), folder_, reads_);
  consts_[out()] = t;
}

// Identity of a constant: the constant itself (Loom's exporter writes Constant layers so); of a
// computed value, an identity Activation.
void Importer::import_identity() {
  const onnx::NodeProto& n = *node_;
  if (n.input_size() == 1 && is_const(0) && n.attribute_size() == 0 && n.output_size() == 1 && !is_graph_output(n.output(0))) {
    consts_[out()] = constant(0, "input");
    return;
  }
  import_activation(nn::identity);
}

// An activation without attributes (Relu, Sigmoid, Tanh, Softplus, HardSwish, Identity).
void Importer::import_activation(const nn::ActivationFn& fn) {
  single_output();
  const nn::Layer x = floating(value(0));
  only_attrs({});
  set(out(), nn::Activation(x, fn, unique(out())));
}

// An activation whose ONNX alpha Loom fixes (Elu: 1, LeakyRelu: 0.01, each ONNX's default): any
// other alpha is refused, `why` saying Loom's.
void Importer::import_fixed_alpha(const nn::ActivationFn& fn, float alpha, const char* why) {
  single_output();
  const nn::Layer x = floating(value(0));
  only_attrs({"alpha"});
  if (attr_float("alpha", alpha) != alpha) throw Unsupported("alpha " + std::to_string(attr_float("alpha", alpha)) + " (" + why + ")");
  set(out(), nn::Activation(x, fn, unique(out())));
}

// torch's Hardsigmoid: alpha 1/6, beta 1/2 (ONNX's defaults are Keras' 0.2 and 0.5).
void Importer::import_hard_sigmoid() {
  single_output();
  const nn::Layer x = floating(value(0));
  only_attrs({"alpha", "beta"});
  if (attr_float("alpha", 0.2f) != 1.0f / 6.0f || attr_float("beta", 0.5f) != 0.5f)
    throw Unsupported("alpha " + std::to_string(attr_float("alpha", 0.2f)) + ", beta " + std::to_string(attr_float("beta", 0.5f)) +
                      " (Loom's hard_sigmoid is torch's: alpha 1/6, beta 0.5)");
  set(out(), nn::Activation(x, nn::hard_sigmoid, unique(out())));
}

// Softmax, LogSoftmax: over the last axis (before opset 13, over the axes from `axis` on).
void Importer::import_softmax(const nn::ActivationFn& fn) {
  single_output();
  const nn::Layer x = floating(value(0));
  only_attrs({"axis"});
  const int64_t r = rank_of(x);
  const int64_t axis = norm_axis(attr_int("axis", opset_ >= 13 ? -1 : 1), r);
  if (axis != r - 1) throw Unsupported("axis " + std::to_string(attr_int("axis", 0)) + " of rank " + std::to_string(r) + " (Loom's softmax is over the last axis)");
  set(out(), nn::Activation(x, fn, unique(out())));
}

// Clip(x, 0, 6): torch's ReLU6 (mobilenet_v2), as relu6; Clip(x, 0) as relu. The bounds are
// inputs from opset 11 on, attributes before (the registry's two entries).
void Importer::import_clip(bool bounds_as_inputs) {
  single_output();
  const nn::Layer x = floating(value(0));
  std::optional<double> lo, hi;
  const auto bound = [&](size_t i, const char* what) -> std::optional<double> {
    if (!has_input(i)) return std::nullopt;
    const Tensor& t = constant(i, what);
    if (t.numel() != 1) throw Unsupported(std::string("its ") + what + " has " + std::to_string(t.numel()) + " values (a scalar is valid)");
    return scalar_of(t);
  };
  if (!bounds_as_inputs) {
    only_attrs({"min", "max"});
    if (attr("min") && attr_float("min", 0) > std::numeric_limits<float>::lowest()) lo = float_attr(attr_float("min", 0));
    if (attr("max") && attr_float("max", 0) < std::numeric_limits<float>::max()) hi = float_attr(attr_float("max", 0));
  } else {
    only_attrs({});
    lo = bound(1, "min");
    hi = bound(2, "max");
  }
  const auto str = [](const std::optional<double>& v, const char* none) { return v ? std::to_string(*v) : std::string(none); };
  if (lo == 0.0 && hi == 6.0) return set(out(), nn::Activation(x, nn::relu6, unique(out())));
  if (lo == 0.0 && !hi) return set(out(), nn::Activation(x, nn::relu, unique(out())));
  throw Unsupported("the bounds [" + str(lo, "-inf") + ", " + str(hi, "inf") + "] (Loom's activations clip to [0, 6] (relu6) or [0, inf) (relu))");
}

void Importer::import_dropout() {
  only_attrs({"ratio", "seed", "is_test"});
  if (node_->output_size() > 1 && !node_->output(1).empty() && uses_.count(node_->output(1)))
    throw Unsupported("its mask output is used");
  if (has_input(2) && scalar_of(constant(2, "training_mode")) != 0) throw Unsupported("training_mode is true");
  double ratio = float_attr(attr_float("ratio", 0.5f));
  if (has_input(1)) ratio = float_attr(static_cast<float>(scalar_of(constant(1, "ratio"))));
  if (!(ratio >= 0 && ratio < 1)) throw Unsupported("ratio " + std::to_string(ratio));
  const nn::Layer x = value(0);
  set(out(), nn::Dropout(x, ratio, static_cast<uint64_t>(attr_int("seed", 0)), unique(out())));
}

// Add, Sub, Mul, Sum, Mean: `make` builds the operator's merge layer from the operands.
void Importer::import_merge(MakeMerge make) {
  only_attrs({});
  single_output();
  std::vector<nn::Layer> ins;
  for (size_t i = 0; i < n_inputs(); ++i) ins.push_back(value(i));
  if (ins.empty()) throw Unsupported("no inputs");
  const std::string name = unique(out());
  if (ins.size() == 1) return set(out(), nn::Activation(ins[0], nn::identity, name));
  // Loom's merges broadcast samples of one rank; the batch axes must agree
  int64_t rank = 0;
  for (const nn::Layer& l : ins) rank = std::max(rank, rank_of(l));
  for (const nn::Layer& l : ins)  // but for constants without a batch axis, broadcast from the right
    if (rank_of(l) != rank && !(batchless_.count(l.impl().get()) && rank_of(l) < rank)) throw Unsupported("operands of ranks " + std::to_string(rank_of(ins[0])) + " and " + std::to_string(rank_of(l)) + " (Loom's merges take one rank)");
  set(out(), make(ins, name));
}

namespace {

nn::Layer add(const std::vector<nn::Layer>& ins, const std::string& name) { return nn::Add(ins, name); }
nn::Layer mean(const std::vector<nn::Layer>& ins, const std::string& name) { return nn::Mean(ins, name); }
nn::Layer multiply(const std::vector<nn::Layer>& ins, const std::string& name) { return nn::Multiply(ins, name); }
nn::Layer subtract(const std::vector<nn::Layer>& ins, const std::string& name) {
  if (ins.size() != 2) throw Unsupported("Sub of " + std::to_string(ins.size()) + " operands");
  return nn::Subtract(ins[0], ins[1], name);
}

}  // namespace

// gelu written out with Erf, starting at the node k that reads x:
//   Loom's exporter: t = x * (1/sqrt 2); e = Erf(t); p = e + 1; h = x * 0.5; y = h * p
//   torch.onnx:      t = x / sqrt 2;     e = Erf(t); p = e + 1; m = x * p;   y = m * 0.5
// y and the other nodes of the formula (`ks`) when it is one.
bool Importer::gelu_at(int k0, const std::string& x, std::string& y, std::vector<int>& ks) const {
  const onnx::NodeProto& n = g_.node(k0);
  if ((n.op_type() != "Mul" && n.op_type() != "Div") || !n.domain().empty() || n.input_size() != 2 || n.output_size() != 1 || n.input(0) != x)
    return false;
  const bool div = n.op_type() == "Div";
  if (!const_near(n.input(1), div ? std::sqrt(2.0) : 1.0 / std::sqrt(2.0))) return false;
  int ke = 0, ka = 0, km = 0, kl = 0, kh = -1;
  const onnx::NodeProto* e = next_reader(n.output(0), "Erf", &ke);
  if (!e) return false;
  const onnx::NodeProto* a = next_reader(e->output(0), "Add", &ka);
  if (!a || a->input_size() != 2) return false;
  if (!const_near(a->input(0) == e->output(0) ? a->input(1) : a->input(0), 1.0)) return false;
  const onnx::NodeProto* m = next_reader(a->output(0), "Mul", &km);
  if (!m || m->input_size() != 2) return false;
  const std::string other = m->input(0) == a->output(0) ? m->input(1) : m->input(0);
  if (other == x) {  // torch: (x * p) * 0.5
    const onnx::NodeProto* l = next_reader(m->output(0), "Mul", &kl);
    if (!l || l->input_size() != 2 || !const_near(l->input(0) == m->output(0) ? l->input(1) : l->input(0), 0.5)) return false;
    y = l->output(0);
  } else {  // Loom: (x * 0.5) * p, where x * 0.5 is a node of its own read only here
    for (int k = 0; k < g_.node_size(); ++k) {
      const auto& h = g_.node(k);
      if (h.output_size() == 1 && h.output(0) == other && h.op_type() == "Mul" && h.input_size() == 2 && h.domain().empty() &&
          ((h.input(0) == x && const_near(h.input(1), 0.5)) || (h.input(1) == x && const_near(h.input(0), 0.5))) &&
          uses_.count(other) && uses_.at(other) == 1)
        kh = k;
    }
    if (kh < 0) return false;
    y = m->output(0);
    kl = km;
  }
  ks.clear();
  for (int k : {ke, ka, km, kl, kh})
    if (k >= 0) ks.push_back(k);
  return true;
}

// gelu's formula from the node being imported, as a single Activation(gelu)
bool Importer::import_gelu() {
  const onnx::NodeProto& n = *node_;
  std::string y;
  std::vector<int> ks;
  if (n.input_size() != 2 || !values_.count(n.input(0)) || !gelu_at(index_, n.input(0), y, ks)) return false;
  if (!is_floating(values_.at(n.input(0)).dtype())) return false;
  set(y, nn::Activation(values_.at(n.input(0)), nn::gelu, unique(y)));
  done_.insert(ks.begin(), ks.end());
  return true;
}

// h * factor (a constant without a batch axis) and -h
nn::Layer Importer::scaled(const nn::Layer& h, double factor, const std::string& name) {
  const nn::Layer c = nn::Constant(full({1}, factor, h.dtype()), unique(name + "/factor"));
  batchless_.insert(c.impl().get());
  return nn::Multiply({h, c}, unique(name));
}

std::vector<Converter> Importer::elementwise_converters() {
  return {
      {"", "Constant", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_constant(); }},
      {"", "Identity", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_identity(); }},
      {"", "Relu", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_activation(nn::relu); }},
      {"", "Sigmoid", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_activation(nn::sigmoid); }},
      {"", "Tanh", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_activation(nn::tanh); }},
      {"", "Softplus", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_activation(nn::softplus); }},
      {"", "Elu", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_fixed_alpha(nn::elu, 1.0f, "Loom's elu has alpha 1"); }},
      {"", "LeakyRelu", kFirstOpset, kLastOpset, true,
       [](Importer& im) { im.import_fixed_alpha(nn::leaky_relu, 0.01f, "Loom's leaky_relu has alpha 0.01"); }},
      {"", "HardSigmoid", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_hard_sigmoid(); }},
      {"", "HardSwish", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_activation(nn::hard_swish); }},
      {"", "Softmax", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_softmax(nn::softmax); }},
      {"", "LogSoftmax", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_softmax(nn::log_softmax); }},
      // the bounds: attributes before opset 11, inputs from then on
      {"", "Clip", kFirstOpset, 10, true, [](Importer& im) { im.import_clip(false); }},
      {"", "Clip", 11, kLastOpset, true, [](Importer& im) { im.import_clip(true); }},
      {"", "Dropout", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_dropout(); }},
      {"", "Add", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_merge(add); }},
      {"", "Sub", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_merge(subtract); }},
      {"", "Sum", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_merge(add); }},
      {"", "Mean", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_merge(mean); }},
      // Mul: gelu's formula where it starts one, else a merge
      {"", "Mul", kFirstOpset, kLastOpset, true,
       [](Importer& im) {
         if (!im.import_gelu()) im.import_merge(multiply);
       }},
      // Div: only as the first node of gelu's formula (torch.onnx's x / sqrt 2), so not claimed
      {"", "Div", kFirstOpset, kLastOpset, false,
       [](Importer& im) {
         if (!im.import_gelu()) throw Unsupported("no Loom layer for this operator");
       }},
  };
}

}  // namespace loom::io::detail
