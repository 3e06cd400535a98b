// ONNX import, shapes (importer.h): Flatten, Reshape, Transpose, Slice and Concat on the axes after
// the batch, and the integers torch.onnx computes from shapes (Shape, Gather, Concat, ...), which
// Loom's static shapes give at import: a Reshape's target shape, a Slice's bounds.
#include "io/onnx/importer.h"

#include <algorithm>
#include <array>

#include "loom/core/error.h"

namespace loom::io::detail {

// torch.onnx writes x.view(n, groups, c / groups, h, w) (shufflenet's channel shuffle) as a
// Reshape to Concat(Unsqueeze(Gather(Shape(x), 0)), ...): values computed from shapes, which
// Loom's static shapes give at import. Nodes that compute integers from Shape and constants
// only, and whose values are read only by such nodes, as a Reshape's target shape or as the
// bounds of a Slice (torch's x.chunk(2, dim=1): shufflenet's split), are not layers: the Reshape
// or Slice evaluates them (evaluated_target, evaluated_bounds).
void Importer::find_shape_arithmetic() {
  static const std::unordered_set<std::string> arithmetic = {"Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Add", "Sub",
                                                            "Mul", "Div", "Slice", "Identity"};
  std::vector<int> candidates;
  std::unordered_set<std::string> derived;
  for (int k = 0; k < g_.node_size(); ++k) {
    const onnx::NodeProto& n = g_.node(k);
    if (done_.count(k) || !n.domain().empty() || n.output_size() != 1 || n.output(0).empty()) continue;
    bool ok = n.op_type() == "Shape";
    if (!ok && arithmetic.count(n.op_type())) {
      bool any = false;
      ok = true;
      for (const auto& i : n.input()) {
        if (derived.count(i)) any = true;
        else if (auto c = consts_.find(i); !(c != consts_.end() && is_integral(c->second.dtype()) && c->second.numel() <= 16)) ok = false;
      }
      ok = ok && any;
    }
    if (!ok) continue;
    derived.insert(n.output(0));
    candidates.push_back(k);
  }
  // readers come after writers: from the last, keep a node whose readers are all kept, Reshapes'
  // shapes or Slices' bounds
  const std::unordered_set<int> candidate(candidates.begin(), candidates.end());
  std::unordered_set<int> kept;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const std::string& v = g_.node(*it).output(0);
    if (is_graph_output(v)) continue;
    bool ok = readers_.count(v) > 0;
    if (ok)
      for (const auto& [k, i] : readers_.at(v)) {
        const onnx::NodeProto& rn = g_.node(k);
        // a Reshape's target shape, or the bounds of a Slice of data (x.chunk: its own arithmetic)
        ok = ok && ((rn.op_type() == "Reshape" && rn.domain().empty() && i == 1) ||
                    (rn.op_type() == "Slice" && rn.domain().empty() && i >= 1 && !candidate.count(k)) || kept.count(k));
      }
    if (ok) kept.insert(*it);
  }
  for (int k : kept) {
    done_.insert(k);
    shape_values_.insert(g_.node(k).output(0));
  }
}

// The target shape `v` of the Reshape being imported, evaluated with the layers' shapes at two
// batch sizes: a value equal at both is a constant; the batch size itself, first, is 0 (keep
// the batch). Unsupported when a shape read is sized at run time beyond the batch, or the
// batch is computed with.
std::vector<int64_t> Importer::evaluated_target(const std::string& v) {
  const auto results = at_two_batch_sizes(v, "its target shape");
  std::vector<int64_t> target = results[0];
  if (results[1].size() != target.size()) throw Unsupported("its target shape's length depends on the batch size");
  for (size_t i = 0; i < target.size(); ++i) {
    if (results[1][i] == target[i]) continue;
    if (i == 0 && target[0] == 7 && results[1][0] == 11) {
      target[0] = 0;  // the batch, copied
      continue;
    }
    throw Unsupported("its target shape computes with the batch size (axis " + std::to_string(i) + ")");
  }
  return target;
}

// The integers `v` (a Slice's bounds) computed from shapes, which must not depend on the batch.
std::vector<int64_t> Importer::evaluated_bounds(const std::string& v, const std::string& what) {
  const auto results = at_two_batch_sizes(v, what);
  if (results[0] != results[1]) throw Unsupported(what + " '" + v + "' depend on the batch size");
  return results[0];
}

// The integers `v` evaluated from the layers' shapes with the batch at 7 and at 11. Unsupported
// when a shape read is sized at run time beyond the batch.
std::array<std::vector<int64_t>, 2> Importer::at_two_batch_sizes(const std::string& v, const std::string& what) {
  // the values whose shapes are read (Shape nodes' inputs), found back from v
  std::vector<std::string> read;
  std::vector<std::string> stack{v};
  std::unordered_set<std::string> seen{v};
  while (!stack.empty()) {
    const std::string w = stack.back();
    stack.pop_back();
    const onnx::NodeProto* n = producer_of(w);
    if (!n || !shape_values_.count(w)) continue;
    if (n->op_type() == "Shape") {
      read.push_back(n->input(0));
      continue;
    }
    for (const auto& i : n->input())
      if (seen.insert(i).second) stack.push_back(i);
  }
  std::array<std::vector<int64_t>, 2> results;
  for (const int64_t batch : {7, 11}) {
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const std::string& w : read) {
      auto it = values_.find(w);
      if (it == values_.end()) continue;  // an initializer's shape: eval_ints reads it
      std::vector<int64_t> dims(it->second.shape().begin(), it->second.shape().end());
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] >= 0) continue;
        if (d != 0) throw Unsupported(what + " reads the shape of '" + w + "', whose axis " + std::to_string(d) + " is sized at run time");
        dims[d] = batch;
      }
      shapes[w] = dims;
    }
    ints_memo_.clear();
    std::set<int> nodes;
    auto r = eval_ints(v, shapes, nodes);
    ints_memo_.clear();
    if (!r) throw Unsupported(what + " '" + v + "' is computed in a way Loom does not evaluate at import");
    results[batch == 7 ? 0 : 1] = *r;
  }
  return results;
}

// Integer values computed from shapes, evaluated with `shapes` (the shapes of the block's
// values at a probe size); nullopt when a value is not computable that way. Vectors are flat
// (a scalar is one value).
std::optional<std::vector<int64_t>> Importer::eval_ints(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes,
                                              int depth) const {
  if (depth > 64) return std::nullopt;
  if (auto it = ints_memo_.find(v); it != ints_memo_.end()) return it->second;
  auto r = eval_ints_of(v, shapes, nodes, depth);
  if (r && r->size() > 16) r = std::nullopt;  // shapes have at most 16 dimensions
  if (r) ints_memo_[v] = *r;  // successes only: a value not computable yet may be once more shapes are known
  return r;
}

std::optional<std::vector<int64_t>> Importer::eval_ints_of(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes,
                                                 int depth) const {
  if (auto it = consts_.find(v); it != consts_.end()) {
    if (!is_integral(it->second.dtype()) || it->second.numel() > 16) return std::nullopt;
    return ints_of(it->second);
  }
  int k = 0;
  const onnx::NodeProto* n = producer_of(v, &k);
  if (!n || !n->domain().empty() || n->output_size() != 1) return std::nullopt;
  const std::string& op = n->op_type();
  if (op == "Shape") {
    std::vector<int64_t> dims;
    if (auto s = shapes.find(n->input(0)); s != shapes.end()) dims = s->second;
    else if (consts_.count(n->input(0))) dims.assign(consts_.at(n->input(0)).shape().begin(), consts_.at(n->input(0)).shape().end());  // an initializer's
    else return std::nullopt;
    const int64_t r = static_cast<int64_t>(dims.size());
    int64_t b = int_attr_of(*n, "start", 0), e = int_attr_of(*n, "end", r);
    b = std::clamp(b < 0 ? b + r : b, int64_t{0}, r);
    e = std::clamp(e < 0 ? e + r : e, int64_t{0}, r);
    nodes.insert(k);
    return e > b ? std::vector<int64_t>(dims.begin() + b, dims.begin() + e) : std::vector<int64_t>{};
  }
  std::vector<std::vector<int64_t>> in;
  for (const auto& i : n->input()) {
    if (i.empty()) return std::nullopt;
    auto r = eval_ints(i, shapes, nodes, depth + 1);
    if (!r) return std::nullopt;
    in.push_back(std::move(*r));
  }
  nodes.insert(k);
  if (in.empty()) return std::nullopt;
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Identity") return in[0];
  if (op == "Cast") {
    const int64_t to = int_attr_of(*n, "to", 0);
    if (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32) return std::nullopt;
    return in[0];
  }
  if (op == "Concat") {
    std::vector<int64_t> r;
    for (const auto& x : in) r.insert(r.end(), x.begin(), x.end());
    return r;
  }
  if (op == "Gather" && in.size() == 2 && int_attr_of(*n, "axis", 0) == 0) {
    std::vector<int64_t> r;
    const int64_t size = static_cast<int64_t>(in[0].size());
    for (int64_t i : in[1]) {
      if (i < -size || i >= size) return std::nullopt;
      r.push_back(in[0][static_cast<size_t>(i < 0 ? i + size : i)]);
    }
    return r;
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2) {
    const size_t size = std::max(in[0].size(), in[1].size());
    if ((in[0].size() != size && in[0].size() != 1) || (in[1].size() != size && in[1].size() != 1)) return std::nullopt;
    std::vector<int64_t> r;
    for (size_t i = 0; i < size; ++i) {
      const int64_t a = in[0][in[0].size() == 1 ? 0 : i], b = in[1][in[1].size() == 1 ? 0 : i];
      constexpr int64_t lim = int64_t{1} << 31;  // products stay within int64
      if (a < -lim || a > lim || b < -lim || b > lim) return std::nullopt;
      if (op == "Div" && b == 0) return std::nullopt;
      r.push_back(op == "Add" ? a + b : op == "Sub" ? a - b : op == "Mul" ? a * b : a / b);
    }
    return r;
  }
  if (op == "Slice" && in.size() >= 3 && in[1].size() == 1 && in[2].size() == 1) {
    if (in.size() > 3 && in[3] != std::vector<int64_t>{0} && in[3] != std::vector<int64_t>{-1}) return std::nullopt;
    if (in.size() > 4 && in[4] != std::vector<int64_t>{1}) return std::nullopt;
    const int64_t size = static_cast<int64_t>(in[0].size());
    int64_t b = in[1][0], e = in[2][0];
    b = std::clamp(b < 0 ? b + size : b, int64_t{0}, size);
    e = std::clamp(e < 0 ? e + size : e, int64_t{0}, size);
    return e > b ? std::vector<int64_t>(in[0].begin() + b, in[0].begin() + e) : std::vector<int64_t>{};
  }
  return std::nullopt;
}

// The shape a Reshape of `in` to the evaluated `target` gives (0 copies, -1 infers; allowzero 0).
std::optional<std::vector<int64_t>> Importer::reshaped(const std::vector<int64_t>& in, std::vector<int64_t> target) {
  int64_t total = 1, known = 1, infer = -1;
  for (int64_t d : target)
    if (d > kMaxAttr) return std::nullopt;  // the probes' shapes are small: no product overflows
  for (int64_t d : in) total *= d;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0) {
      if (i >= in.size()) return std::nullopt;
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      return std::nullopt;
    } else {
      known *= target[i];
      if (known > (int64_t{1} << 40)) return std::nullopt;
    }
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    target[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return target;
}

void Importer::import_flatten() {
  only_attrs({"axis"});
  single_output();
  const nn::Layer x = value(0);
  const int64_t r = rank_of(x);
  if (r < 1) throw Unsupported("a scalar input");
  const int64_t axis = attr_int("axis", 1) < 0 ? attr_int("axis", 1) + r : attr_int("axis", 1);
  if (axis != 1) throw Unsupported("axis " + std::to_string(attr_int("axis", 1)) + " (Loom's Flatten keeps the batch axis: axis 1)");
  set(out(), nn::Flatten(x, unique(out())));
}

void Importer::import_reshape() {
  only_attrs({"allowzero", "shape"});
  single_output();
  if (attr("shape")) throw Unsupported("the shape as an attribute (opset < 5)");
  const nn::Layer x = value(0);
  const bool computed = has_input(1) && shape_values_.count(node_->input(1));
  std::vector<int64_t> s = computed ? evaluated_target(node_->input(1)) : ints_of(constant(1, "shape"));
  const bool allowzero = attr_int("allowzero", 0) != 0;
  if (computed && allowzero) throw Unsupported("allowzero with a computed target shape");
  const Shape& in = x.shape();
  if (s.empty() || in.empty()) throw Unsupported("a reshape from or to a scalar");
  // the batch axis must stay: 0 (copied), or the same fixed size
  const bool keep = (!allowzero && s[0] == 0) || (in[0] >= 0 && s[0] == in[0]);
  bool ok = keep;
  if (!ok && s[0] == -1) {  // (-1, ...) keeps the batch when the rest holds the per-sample size
    int64_t per = 1, rest = 1;
    for (size_t i = 1; i < in.size(); ++i) per = in[i] < 0 ? -1 : (per < 0 ? -1 : per * in[i]);
    for (size_t i = 1; i < s.size(); ++i) rest = (s[i] <= 0 || rest < 0) ? -1 : rest * s[i];
    ok = per > 0 && rest == per;
  }
  if (!ok) throw Unsupported("the target shape " + shape_str(Shape(s.begin(), s.end())) + " does not keep the batch axis (Loom's Reshape reshapes each sample)");
  Shape target;
  for (size_t i = 1; i < s.size(); ++i) {
    int64_t d = s[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size() || in[i] < 0) throw Unsupported("a 0 (copy) in the target shape for a dimension only known at run time");
      d = in[i];
    }
    if (d < -1 || d == 0) throw Unsupported("the target dimension " + std::to_string(d));
    target.push_back(d);
  }
  set(out(), nn::Reshape(x, target, unique(out())));
}

void Importer::import_transpose() {
  only_attrs({"perm"});
  single_output();
  if (auto it = node_->input_size() > 0 ? time_major_.find(node_->input(0)) : time_major_.end(); it != time_major_.end() && attr_ints("perm") == std::vector<int64_t>{1, 0, 2})
    return set(out(), it->second);  // back to batch-first
  const nn::Layer x = value(0);
  const int64_t r = rank_of(x);
  std::vector<int64_t> perm = attr_ints("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r) throw Unsupported("perm has " + std::to_string(perm.size()) + " axes for rank " + std::to_string(r));
  if (r == 3 && perm == std::vector<int64_t>{1, 0, 2}) {
    // (batch, time, features) -> (time, batch, features) for recurrent nodes (time-major)
    if (read_as_sequence_only(out())) {
      time_major_[out()] = x;
      return;
    }
  }
  if (perm[0] != 0) throw Unsupported("perm moves the batch axis (Loom's Transpose permutes the axes after it)");
  std::vector<bool> seen(static_cast<size_t>(r), false);
  Axes p;
  for (size_t i = 1; i < perm.size(); ++i) {
    if (perm[i] < 1 || perm[i] >= r || seen[static_cast<size_t>(perm[i])]) throw Unsupported("perm is not a permutation");
    seen[static_cast<size_t>(perm[i])] = true;
    p.push_back(perm[i] - 1);
  }
  set(out(), nn::Transpose(x, p, unique(out())));
}

// Slice of data: each axis after the batch becomes an AxisSlice layer (step >= 1) or, reversed whole
// (step -1, as Loom's exporter writes Flip), a Flip. Bounds are constants or computed from
// shapes (torch's x.chunk), and are resolved against the input's sizes here.
void Importer::import_slice() {
  only_attrs({});
  single_output();
  nn::Layer x = value(0);
  const int64_t rank = rank_of(x);
  const auto ints = [&](int i, const std::string& what) -> std::vector<int64_t> {
    if (has_input(i) && shape_values_.count(node_->input(i))) return evaluated_bounds(node_->input(i), "its " + what);
    return ints_of(constant(i, what.c_str()));
  };
  const std::vector<int64_t> starts = ints(1, "starts"), ends = ints(2, "ends");
  std::vector<int64_t> axes, steps;
  if (has_input(3)) axes = ints(3, "axes");
  else for (int64_t a = 0; a < static_cast<int64_t>(starts.size()); ++a) axes.push_back(a);
  if (has_input(4)) steps = ints(4, "steps");
  else steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw Unsupported("its starts, ends, axes and steps have different lengths");
  std::set<int64_t> seen;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t axis = norm_axis(axes[k], rank);
    if (!seen.insert(axis).second) throw Unsupported("the axis " + std::to_string(axes[k]) + " is given twice");
    if (axis == 0) throw Unsupported("it slices the batch axis 0 (Loom's layers keep every sample)");
    const int64_t n = x.shape()[axis];
    if (n < 0) throw Unsupported("the axis " + std::to_string(axis) + " is sized at run time");
    const int64_t step = steps[k];
    if (step == 0) throw Unsupported("a step of 0");
    // ONNX's bounds: negative from the end, then clamped ([0, n] going forward, [-1, n-1] back)
    const auto bound = [n](int64_t i, int64_t lo, int64_t hi) {
      if (i < 0) i = i < -n ? -n - 1 : i + n;  // (the min: beyond the start)
      return std::clamp(i, lo, hi);
    };
    const std::string name = unique(starts.size() == 1 ? out() : out() + "/axis" + std::to_string(axis));
    if (step < 0) {
      if (step != -1 || bound(starts[k], -1, n - 1) != n - 1 || bound(ends[k], -1, n - 1) != -1)
        throw Unsupported("a negative step other than -1 over the whole axis (a Flip)");
      x = nn::Flip(x, {axis - 1}, name);
      continue;
    }
    const int64_t b = bound(starts[k], 0, n), e = bound(ends[k], 0, n);
    if (b == 0 && e == n && step == 1) continue;  // the whole axis
    x = nn::AxisSlice(x, axis - 1, b, std::max(b, e), step, name);
  }
  set(out(), x);
}

void Importer::import_concat() {
  only_attrs({"axis"});
  single_output();
  if (!attr("axis")) throw Unsupported("no axis");
  std::vector<nn::Layer> ins;
  for (size_t i = 0; i < n_inputs(); ++i) ins.push_back(value(i));
  if (ins.empty()) throw Unsupported("no inputs");
  const int64_t axis = norm_axis(attr_int("axis", 0), rank_of(ins[0]));
  if (axis == 0) throw Unsupported("axis 0 (Loom's Concat joins samples, not batches)");
  set(out(), nn::Concat(ins, axis, unique(out())));
}

std::vector<Converter> Importer::shape_converters() {
  return {
      {"", "Flatten", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_flatten(); }},
      {"", "Reshape", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_reshape(); }},
      {"", "Transpose", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_transpose(); }},
      {"", "Slice", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_slice(); }},
      {"", "Concat", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_concat(); }},
  };
}

}  // namespace loom::io::detail
