// ONNX import, convolution and pooling (importer.h): Conv, ConvTranspose, MaxPool, AveragePool
// (with a zero Pad before it folded in), GlobalAveragePool / GlobalMaxPool (+ Flatten), the
// Reduce operators over axes after the batch (as GlobalPool), and the exporter's adaptive average
// pooling, a pattern of nodes found before the nodes are imported one by one.
#include "io/onnx/importer.h"

#include <algorithm>

#include "loom/core/error.h"
#include "loom/ops/creation.h"

namespace loom::io::detail {

// ONNX pads (begins..., ends...) of `n` axes, checked.
std::vector<std::pair<int64_t, int64_t>> Importer::pads_of(size_t n) const {
  const std::vector<int64_t> p = attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (p.size() != 2 * n) throw Unsupported("pads has " + std::to_string(p.size()) + " values for " + std::to_string(n) + " spatial axes");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] < 0 || p[i + n] < 0) throw Unsupported("negative pads");
    if (p[i] > kMaxAttr || p[i + n] > kMaxAttr) throw Unsupported("pads past 2^20");
    out.push_back({p[i], p[i + n]});
  }
  return out;
}

std::vector<int64_t> Importer::per_axis(const char* name, size_t n) const {
  std::vector<int64_t> v = attr_ints(name, std::vector<int64_t>(n, 1));
  if (v.size() != n) throw Unsupported(std::string(name) + " has " + std::to_string(v.size()) + " values for " + std::to_string(n) + " spatial axes");
  for (int64_t x : v)
    if (x < 1 || x > kMaxAttr) throw Unsupported(std::string(name) + " holds " + std::to_string(x));
  return v;
}

void Importer::import_conv() {
  only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  single_output();
  const nn::Layer x = floating(value(0));
  const Tensor& w = constant(1, "W (the weights)");
  if (w.ndim() != 3 && w.ndim() != 4) throw Unsupported("a " + std::to_string(w.ndim() - 2) + "-d convolution (Loom has Conv1D and Conv2D)");
  const size_t n = static_cast<size_t>(w.ndim() - 2);
  if (rank_of(x) != w.ndim()) throw Unsupported("the input's rank " + std::to_string(rank_of(x)) + " does not match the weights'");
  std::vector<int64_t> k(w.shape().begin() + 2, w.shape().end());
  if (attr("kernel_shape") && attr_ints("kernel_shape") != k) throw Unsupported("kernel_shape differs from the weights' shape");
  const auto strides = per_axis("strides", n), dil = per_axis("dilations", n);
  const int64_t group = attr_int("group", 1);
  if (group < 1) throw Unsupported("group " + std::to_string(group));
  const std::string auto_pad = attr_string("auto_pad", "NOTSET");
  nn::ConvOptions o{.stride = IntList(strides), .dilation = IntList(dil), .groups = group, .bias = has_input(2)};
  if (auto_pad == "VALID") {
    o.padding = "valid";
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    bool ok = true;
    for (size_t i = 0; i < n; ++i) ok = ok && strides[i] == 1 && (auto_pad == "SAME_UPPER" || dil[i] * (k[i] - 1) % 2 == 0);
    if (!ok) throw Unsupported("auto_pad " + auto_pad + " with strides > 1 (or odd total padding for SAME_LOWER) depends on the input size");
    o.padding = "same";
  } else if (auto_pad == "NOTSET") {
    std::vector<int64_t> pairs;
    for (const auto& [b, e] : pads_of(n)) pairs.insert(pairs.end(), {b, e});
    o.padding = ConvPadding(pairs);
  } else {
    throw Unsupported("auto_pad '" + auto_pad + "'");
  }
  const int64_t cin = x.shape()[1];
  if (cin < 0 || cin != w.shape()[1] * group)
    throw Unsupported("the input has " + std::to_string(cin) + " channels; the weights and group say " + std::to_string(w.shape()[1] * group));
  Tensor b;
  if (has_input(2)) b = constant(2, "B (the bias)");
  const std::string name = unique(out());
  nn::Layer l = n == 1 ? nn::Layer(nn::Conv1D(x, w.shape()[0], k[0], o, name)) : nn::Layer(nn::Conv2D(x, w.shape()[0], IntList(k), o, name));
  param(l, "weights", w);
  if (has_input(2)) param(l, "bias", b);
  set(out(), l);
}

void Importer::import_conv_transpose() {
  only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "pads", "strides"});
  single_output();
  const nn::Layer x = floating(value(0));
  const Tensor& w = constant(1, "W (the weights)");
  if (w.ndim() != 4 || rank_of(x) != 4) throw Unsupported("a " + std::to_string(w.ndim() - 2) + "-d transposed convolution (Loom has Conv2DTranspose)");
  std::vector<int64_t> k(w.shape().begin() + 2, w.shape().end());
  if (attr("kernel_shape") && attr_ints("kernel_shape") != k) throw Unsupported("kernel_shape differs from the weights' shape");
  if (attr_string("auto_pad", "NOTSET") != "NOTSET") throw Unsupported("auto_pad '" + attr_string("auto_pad", "") + "'");
  const int64_t group = attr_int("group", 1);
  if (group < 1) throw Unsupported("group " + std::to_string(group));
  std::vector<int64_t> pad;
  for (const auto& [b, e] : pads_of(2)) {
    if (b != e) throw Unsupported("asymmetric pads (Loom's Conv2DTranspose pads both sides alike)");
    pad.push_back(b);
  }
  std::vector<int64_t> op = attr_ints("output_padding", {0, 0});
  if (op.size() != 2) throw Unsupported("output_padding has " + std::to_string(op.size()) + " values");
  for (int64_t v : op)
    if (v < 0 || v > kMaxAttr) throw Unsupported("output_padding holds " + std::to_string(v));
  nn::ConvTransposeOptions o{.stride = IntList(per_axis("strides", 2)), .padding = IntList(pad), .output_padding = IntList(op),
                             .dilation = IntList(per_axis("dilations", 2)), .groups = group, .bias = has_input(2)};
  if (x.shape()[1] != w.shape()[0])
    throw Unsupported("the input has " + std::to_string(x.shape()[1]) + " channels; the weights say " + std::to_string(w.shape()[0]));
  if (w.shape()[0] % group != 0) throw Unsupported("the input channels do not divide into the groups");
  Tensor b;
  if (has_input(2)) b = constant(2, "B (the bias)");
  nn::Layer l = nn::Conv2DTranspose(x, w.shape()[1] * group, IntList(k), o, unique(out()));
  param(l, "weights", w);
  if (has_input(2)) param(l, "bias", b);
  set(out(), l);
}

void Importer::import_pool(bool max) {
  only_attrs({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides", "storage_order"});
  single_output();
  // a zero Pad before it (torch's nn.AvgPool2d with padding and count_include_pad): its widths
  // are the pooling's padding, counted in the averages as Loom's average pooling counts them
  std::vector<int64_t> padded;
  const auto folded = node_->input_size() > 0 ? folded_pads_.find(node_->input(0)) : folded_pads_.end();
  if (folded != folded_pads_.end()) padded = folded->second.second;
  const nn::Layer x = floating(folded != folded_pads_.end() ? folded->second.first : value(0));
  const std::vector<int64_t> k = attr_ints("kernel_shape");
  for (int64_t v : k)
    if (v < 1 || v > kMaxAttr) throw Unsupported("kernel_shape holds " + std::to_string(v));
  if (k.size() != 2 || rank_of(x) != 4) throw Unsupported(std::to_string(k.size()) + "-d pooling (Loom pools (N, C, H, W))");
  const std::string auto_pad = attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") throw Unsupported("auto_pad '" + auto_pad + "'");
  for (int64_t d : per_axis("dilations", 2))
    if (d != 1) throw Unsupported("dilations (Loom's pooling has none)");
  const auto strides = per_axis("strides", 2);
  std::vector<int64_t> pad;
  bool any_pad = false;
  if (auto_pad == "VALID" && !padded.empty()) throw Unsupported("auto_pad 'VALID' after a Pad");
  size_t axis = 0;
  for (auto [b, e] : pads_of(2)) {
    any_pad = any_pad || b != 0 || e != 0;  // the node's own padding (the Pad's zeros are data: always counted)
    if (!padded.empty()) b += padded[axis], e += padded[axis + 2];
    ++axis;
    if (b != e) throw Unsupported("asymmetric pads (Loom pads both sides alike)");
    pad.push_back(b);
  }
  if (auto_pad == "VALID") pad = {0, 0}, any_pad = false;
  const bool ceil = attr_int("ceil_mode", 0) != 0;
  if (!max && attr_int("count_include_pad", 0) == 0 && (any_pad || ceil))
    throw Unsupported("count_include_pad = 0 with padding or ceil_mode (Loom's average pooling counts the padding)");
  for (size_t i = 0; i < 2; ++i)
    if (2 * pad[i] > k[i]) throw Unsupported("pads larger than half the kernel");
  nn::PoolOptions o{.stride = IntList(strides), .padding = IntList(pad), .ceil_mode = ceil};
  const std::string name = unique(out());
  nn::Layer l = max ? nn::Layer(nn::MaxPool2D(x, IntList(k), o, name)) : nn::Layer(nn::AvgPool2D(x, IntList(k), o, name));
  set(out(), l);
}

void Importer::import_global_pool(bool max) {
  only_attrs({});
  single_output();
  const nn::Layer x = floating(value(0));
  if (rank_of(x) < 3) throw Unsupported("the input has rank < 3");
  // followed by Flatten(axis 1) read by nothing else: one GlobalPool (N, C)
  const int k = sole_reader(out());
  if (k >= 0) {
    const onnx::NodeProto& f = g_.node(k);
    int64_t axis = 1;
    for (const auto& a : f.attribute())
      if (a.name() == "axis") axis = a.i();
    if (f.op_type() == "Flatten" && f.domain().empty() && axis == 1 && f.output_size() == 1 && f.attribute_size() <= 1) {
      set(f.output(0), nn::GlobalPool(x, max ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, unique(f.output(0))));
      done_.insert(k);
      return;
    }
  }
  if (!max && rank_of(x) == 4) return set(out(), nn::AdaptiveAvgPool2D(x, {1, 1}, unique(out())));
  const nn::Layer p = nn::GlobalPool(x, max ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, unique(out() + "/pooled"));
  Shape target{-1};
  for (int64_t d = 2; d < rank_of(x); ++d) target.push_back(1);
  set(out(), nn::Reshape(p, target, unique(out())));
}

// Pad with zeros: none at all (torch writes one before every nn.AvgPool2d) is no layer; widths
// on the spatial axes before an AveragePool that reads nothing else are that pooling's padding.
// The widths are attributes before opset 11, inputs from then on (the registry's two entries).
void Importer::import_pad(bool widths_as_inputs) {
  single_output();
  only_attrs({"mode", "pads", "value"});
  const std::string mode = attr_string("mode", "constant");
  if (mode != "constant") throw Unsupported("mode '" + mode + "' (Loom folds zero constant padding only)");
  std::vector<int64_t> pads;
  double fill = 0;
  if (!widths_as_inputs) {
    pads = attr_ints("pads");
    fill = attr_float("value", 0.0f);
  } else {
    pads = ints_of(constant(1, "pads"));
    if (has_input(2)) fill = scalar_of(constant(2, "constant_value"));
    if (has_input(3)) throw Unsupported("its axes input");
  }
  const nn::Layer x = value(0);
  const int64_t r = rank_of(x);
  if (static_cast<int64_t>(pads.size()) != 2 * r) throw Unsupported("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(r));
  bool zero = true;
  for (int64_t p : pads) {
    if (p < 0 || p > kMaxAttr) throw Unsupported("the pad width " + std::to_string(p) + " (valid: 0 to 2^20)");
    zero = zero && p == 0;
  }
  if (zero) return set(out(), x);  // nothing added: the value itself
  if (fill != 0) throw Unsupported("the value " + std::to_string(fill) + " (Loom folds zero padding into an average pooling)");
  const int k = sole_reader(out());
  const bool pool = k >= 0 && g_.node(k).op_type() == "AveragePool" && g_.node(k).domain().empty() && g_.node(k).input(0) == out();
  if (!pool || r != 4 || pads[0] || pads[1] || pads[4] || pads[5])
    throw Unsupported("zero padding other than of the spatial axes before an AveragePool reading nothing else (which Loom folds into the pooling)");
  folded_pads_[out()] = {x, {pads[2], pads[3], pads[6], pads[7]}};
}

// ReduceMean / ReduceMax / ReduceSum / ReduceMin over axes after the batch (x.mean([2, 3]) in
// mnasnet): the kept axes moved first and joined, the reduced ones joined after them, a
// GlobalPool over those, and the kept axes (with ones for the reduced, keepdims) restored.
// The axes are an attribute before opset 18 (ReduceSum: before 13), an input from then on.
void Importer::import_reduce(const Reduction& reduction) {
  single_output();
  only_attrs({"axes", "keepdims", "noop_with_empty_axes"});
  const bool axes_input = opset_ >= reduction.axes_input_since;
  if (axes_input && attr("axes")) throw Unsupported("axes as an attribute at opset " + std::to_string(opset_) + " (an input there)");
  const nn::Layer x = floating(value(0));
  const int64_t r = rank_of(x);
  std::vector<int64_t> axes = axes_input ? (has_input(1) ? ints_of(constant(1, "axes")) : std::vector<int64_t>{}) : attr_ints("axes");
  if (axes.empty()) {
    if (attr_int("noop_with_empty_axes", 0) != 0) return set(out(), nn::Activation(x, nn::identity, unique(out())));
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  }
  std::vector<bool> reduced(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    const int64_t n = norm_axis(a, r);
    if (reduced[static_cast<size_t>(n)]) throw Unsupported("the axis " + std::to_string(a) + " is given twice");
    reduced[static_cast<size_t>(n)] = true;
  }
  if (reduced[0]) throw Unsupported("it reduces the batch axis 0 (Loom's layers keep the batch)");
  const bool keepdims = attr_int("keepdims", 1) != 0;
  const Shape& in = x.shape();
  Axes perm;
  Shape kept_dims;
  int64_t kept = 1, red = 1;
  for (int64_t a = 1; a < r; ++a)
    if (!reduced[static_cast<size_t>(a)]) perm.push_back(a - 1), kept_dims.push_back(in[static_cast<size_t>(a)]);
  for (int64_t a = 1; a < r; ++a) {
    if (in[static_cast<size_t>(a)] < 0) throw Unsupported("the axis " + std::to_string(a) + " is sized at run time (the reduction is reshaped at import)");
    if (reduced[static_cast<size_t>(a)]) perm.push_back(a - 1), red *= in[static_cast<size_t>(a)];
    else kept *= in[static_cast<size_t>(a)];
  }
  if (red == 0 || kept == 0) throw Unsupported("an empty axis");
  const std::string name = unique(out());
  nn::Layer h = x;
  if (reduction.negated) h = negated(h, name + "/negated");
  bool identity_perm = true;
  for (size_t i = 0; i < perm.size(); ++i) identity_perm = identity_perm && perm[i] == static_cast<int64_t>(i);
  if (!identity_perm) h = nn::Transpose(h, perm, unique(name + "/kept_first"));
  // (N, C, spatial...) is what GlobalPool pools: one kept axis and the reduced ones after it as they are
  if (kept_dims.size() != 1 || r < 3) h = nn::Reshape(h, {kept, red}, unique(name + "/joined"));
  h = nn::GlobalPool(h, reduction.max_pool ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, unique(name + "/pooled"));
  if (reduction.summed) h = scaled(h, static_cast<double>(red), name + "/sum");
  if (reduction.negated) h = negated(h, name + "/min");
  Shape target;
  for (int64_t a = 1; a < r; ++a)
    if (!reduced[static_cast<size_t>(a)]) target.push_back(in[static_cast<size_t>(a)]);
    else if (keepdims) target.push_back(1);
  if (target.empty()) throw Unsupported("it reduces every axis after the batch without keepdims (a layer's output keeps an axis after the batch)");
  if (target != Shape{kept}) h = nn::Reshape(h, target, name);
  else h = nn::Activation(h, nn::identity, name);  // the value's name on its layer
  set(out(), h);
}

// o when `p` is the (o, L) averaging matrix onnx_export.cpp's adaptive_matrix builds from the axis
// `axis` of x (Shape, Squeeze, Range, Mul, Div, Add, GreaterOrEqual, Less, And, Cast, Sub); 0 otherwise.
int64_t Importer::adaptive_matrix_size(const std::string& p, const std::string& x, int64_t axis, std::set<int>& nodes) const {
  const auto two = [](const onnx::NodeProto* n) { return n && n->input_size() == 2 && n->output_size() == 1; };
  const onnx::NodeProto* div = made_by(p, "Div", nodes);
  if (!two(div)) return 0;
  const onnx::NodeProto *inf = made_by(div->input(0), "Cast", nodes), *cntf = made_by(div->input(1), "Cast", nodes);
  if (!inf || !cntf || int_attr_of(*inf, "to", 0) != onnx::TensorProto::FLOAT || int_attr_of(*cntf, "to", 0) != onnx::TensorProto::FLOAT) return 0;
  const onnx::NodeProto *in = made_by(inf->input(0), "And", nodes), *cnt = made_by(cntf->input(0), "Sub", nodes);
  if (!two(in) || !two(cnt)) return 0;
  const std::string &end = cnt->input(0), &start = cnt->input(1);
  const onnx::NodeProto *ge = made_by(in->input(0), "GreaterOrEqual", nodes), *lt = made_by(in->input(1), "Less", nodes);
  if (!two(ge) || !two(lt) || ge->input(1) != start || lt->input(1) != end || ge->input(0) != lt->input(0)) return 0;
  const onnx::NodeProto* range = made_by(ge->input(0), "Range", nodes);
  if (!range || range->input_size() != 3 || !const_is(range->input(0), {0}, {}) || !const_is(range->input(2), {1}, {})) return 0;
  const onnx::NodeProto* sq = made_by(range->input(1), "Squeeze", nodes);
  if (!two(sq) || !const_is(sq->input(1), {0}, {1})) return 0;
  const std::string& len = sq->input(0);
  const onnx::NodeProto* shape = made_by(len, "Shape", nodes);
  if (!shape || shape->input_size() != 1 || shape->input(0) != x || shape->attribute_size() != 2 || int_attr_of(*shape, "start", -1) != axis ||
      int_attr_of(*shape, "end", -1) != axis + 1)
    return 0;
  const onnx::NodeProto *sdiv = made_by(start, "Div", nodes), *ediv = made_by(end, "Div", nodes);
  if (!two(sdiv) || !two(ediv) || sdiv->input(1) != ediv->input(1)) return 0;
  const auto oc = consts_.find(sdiv->input(1));
  if (oc == consts_.end() || oc->second.numel() != 1 || !is_integral(oc->second.dtype())) return 0;
  const int64_t o = ints_of(oc->second)[0];
  if (o < 1 || o > kMaxAttr || !const_is(sdiv->input(1), {o}, {1})) return 0;
  const onnx::NodeProto *il = made_by(sdiv->input(0), "Mul", nodes), *add = made_by(ediv->input(0), "Add", nodes);
  if (!two(il) || !two(add) || il->input(1) != len || !const_is(add->input(1), {o - 1}, {1})) return 0;
  const onnx::NodeProto* i1l = made_by(add->input(0), "Mul", nodes);
  if (!two(i1l) || i1l->input(1) != len) return 0;
  std::vector<int64_t> i(static_cast<size_t>(o)), i1(static_cast<size_t>(o));
  for (int64_t k = 0; k < o; ++k) i[static_cast<size_t>(k)] = k, i1[static_cast<size_t>(k)] = k + 1;
  if (!const_is(il->input(0), i, {o, 1}) || !const_is(i1l->input(0), i1, {o, 1})) return 0;
  return o;
}

// The exporter's AdaptiveAvgPool2D: y = MatMul(MatMul(rows, x), Transpose(cols)) with the
// averaging matrices above, their nodes read by nothing else: one AdaptiveAvgPool2D.
void Importer::find_adaptive_pools() {
  for (int k = 0; k < g_.node_size(); ++k) {
    const onnx::NodeProto& n = g_.node(k);
    if (n.op_type() != "MatMul" || !n.domain().empty() || n.input_size() != 2 || consts_.count(n.input(1))) continue;
    std::set<int> nodes;
    const onnx::NodeProto *first = made_by(n.input(0), "MatMul", nodes), *t = made_by(n.input(1), "Transpose", nodes);
    if (!first || !t || first->input_size() != 2 || t->input_size() != 1) continue;
    bool perm_ok = false;
    for (const auto& a : t->attribute()) perm_ok = a.name() == "perm" && a.ints_size() == 2 && a.ints(0) == 1 && a.ints(1) == 0;
    if (!perm_ok || t->attribute_size() != 1) continue;
    const std::string& x = first->input(1);
    const int64_t oh = adaptive_matrix_size(first->input(0), x, 2, nodes), ow = adaptive_matrix_size(t->input(0), x, 3, nodes);
    if (oh == 0 || ow == 0) continue;
    // closed: the pattern's values are read by its own nodes only (and by no graph output)
    bool closed = true;
    for (int m : nodes)
      for (const auto& o : g_.node(m).output()) {
        int inside = 0;
        if (auto it = readers_.find(o); it != readers_.end())
          for (const auto& [r, i] : it->second) inside += r == k || nodes.count(r) ? 1 : 0;
        closed = closed && (o.empty() || !uses_.count(o) || uses_.at(o) == inside);
      }
    if (!closed) continue;
    adaptive_[k] = {x, oh, ow};
    done_.insert(nodes.begin(), nodes.end());
  }
}

void Importer::import_adaptive_pool(const AdaptivePool& a) {
  if (poisoned_.count(a.x)) return poison(*node_);
  const nn::Layer x = floating(value_named(a.x));
  if (rank_of(x) != 4) throw Unsupported("adaptive pooling of an input of rank " + std::to_string(rank_of(x)) + " (Loom's pools (N, C, H, W))");
  set(out(), nn::AdaptiveAvgPool2D(x, {a.oh, a.ow}, unique(out())));
}

std::vector<Converter> Importer::conv_converters() {
  return {
      {"", "Conv", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_conv(); }},
      {"", "ConvTranspose", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_conv_transpose(); }},
      {"", "MaxPool", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_pool(true); }},
      {"", "AveragePool", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_pool(false); }},
      {"", "GlobalAveragePool", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_global_pool(false); }},
      {"", "GlobalMaxPool", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_global_pool(true); }},
      // the widths (and value): attributes before opset 11, inputs from then on
      {"", "Pad", kFirstOpset, 10, true, [](Importer& im) { im.import_pad(false); }},
      {"", "Pad", 11, kLastOpset, true, [](Importer& im) { im.import_pad(true); }},
      {"", "ReduceMean", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_reduce({}); }},
      {"", "ReduceMax", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_reduce({.max_pool = true}); }},
      {"", "ReduceMin", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_reduce({.max_pool = true, .negated = true}); }},
      // ReduceSum's axes became an input at opset 13, the others' at 18
      {"", "ReduceSum", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_reduce({.axes_input_since = 13, .summed = true}); }},
  };
}

}  // namespace loom::io::detail
