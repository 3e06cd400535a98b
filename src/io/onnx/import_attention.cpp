// ONNX import, attention (importer.h, import_patterns.h): a multi-head attention block back as one
// MultiHeadAttention (and, around a self-attention, a whole TransformerEncoderLayer,
// import_encoder.cpp), from the two forms that write it:
//   Loom's exporter (batch first): per projection MatMul (+ Add), Reshape (0, 0, H, d) and
//     Transpose (0, 2, 1, 3); k Transposed (0, 1, 3, 2); scores = q k^T scaled by a constant,
//     its causal and padding masks as Where(-inf); Softmax; MatMul with v; Transpose (0, 2, 1, 3),
//     Reshape (0, 0, E); the out projection MatMul (+ Add);
//   torch.onnx (nn.MultiheadAttention, batch_first, self-attention): Transpose (1, 0, 2) to
//     (L, N, E), the packed in-projection MatMul (+ Add) of (E, 3E) sliced into q, k, v, each
//     Reshaped to (L, N H, d) (heads folded into the batch) and Transposed to (N H, L, d) (k to
//     (N H, d, L)); q divided by √d; Softmax; MatMul with v; Transpose (1, 0, 2), Reshape
//     (L N, E); the out projection Gemm (or MatMul + Add); Reshape (L, N, E), Transpose (1, 0, 2)
//     (import_attention_torch.cpp).
// The shape arithmetic torch writes (Shape, Gather, Div, Concat, ...) is evaluated at two probe
// sizes: each Reshape must give the shapes above and each Slice the same columns at both.
// Anything else (masks added to the scores, cross-attention, other head splits) is refused
// by the Softmax node, with the reason.
#include "io/onnx/importer.h"

#include <cmath>
#include <limits>

#include "loom/core/error.h"
#include "loom/ops/manipulation.h"

namespace loom::io::detail {

// Every Softmax that weighs values by scores of two computed values: matched as a block
// (above), or refused by name with the reason.
void Importer::find_attention() {
  const auto computed_matmul = [&](const std::string& v) {
    auto it = producer_.find(v);
    if (it == producer_.end()) return false;
    const auto& m = g_.node(it->second);
    return m.op_type() == "MatMul" && m.domain().empty() && m.input_size() == 2 && !consts_.count(m.input(0)) && !consts_.count(m.input(1));
  };
  for (int k = 0; k < g_.node_size(); ++k) {
    const auto& n = g_.node(k);
    if (n.op_type() != "Softmax" || !n.domain().empty() || n.input_size() != 1 || n.output_size() != 1 || done_.count(k)) continue;
    // through the masks' Where and Add (torch's baddbmm: Add of the scaled product and the scaled
    // mask), if any, and scales by constants
    const auto unscaled = [&](std::string v) {
      for (int i = 0; i < 3; ++i) {
        auto it = producer_.find(v);
        if (it == producer_.end()) break;
        const auto& s = g_.node(it->second);
        if ((s.op_type() != "Mul" && s.op_type() != "Div") || s.input_size() != 2 || !consts_.count(s.input(1))) break;
        v = s.input(0);
      }
      return v;
    };
    std::string scores = unscaled(n.input(0));
    int steps = 0;  // bounded: a hostile file's values may form a cycle
    for (auto it = producer_.find(scores); it != producer_.end() && (g_.node(it->second).op_type() == "Where" || g_.node(it->second).op_type() == "Add") &&
                                            g_.node(it->second).input_size() >= 3 - (g_.node(it->second).op_type() == "Add") && ++steps < 8;
         it = producer_.find(scores))
      scores = unscaled(g_.node(it->second).op_type() == "Where"                  ? g_.node(it->second).input(2)
                        : computed_matmul(unscaled(g_.node(it->second).input(0))) ? g_.node(it->second).input(0)
                                                                                  : g_.node(it->second).input(1));
    if (!computed_matmul(scores)) continue;
    // read by a MatMul with a computed value (through a Dropout: a training-mode export)
    bool weighs = false;
    const auto weighing = [&](const std::string& v) {
      if (auto it = readers_.find(v); it != readers_.end())
        for (const auto& ri : it->second) {
          const auto& m = g_.node(ri.first);
          weighs = weighs || (m.op_type() == "MatMul" && ri.second == 0 && m.input_size() == 2 && !consts_.count(m.input(1)));
        }
    };
    weighing(n.output(0));
    if (auto it = readers_.find(n.output(0)); it != readers_.end())
      for (const auto& ri : it->second)
        if ((g_.node(ri.first).op_type() == "Dropout" && g_.node(ri.first).output_size() >= 1) ||
            (g_.node(ri.first).op_type() == "Where" && ri.second == 2 && g_.node(ri.first).output_size() == 1))  // (Loom's padded weights)
          weighing(g_.node(ri.first).output(0));
    if (!weighs) continue;
    try {
      AttentionBlock a = match_attention(k);
      for (int m : a.nodes)
        if (done_.count(m)) throw Unsupported("its nodes overlap another block's");
      if (std::optional<EncoderBlock> e = match_encoder(a)) {
        done_.insert(e->nodes.begin(), e->nodes.end());
        const int last = *e->nodes.rbegin();
        done_.erase(last);
        encoders_[last] = std::move(*e);
      } else {
        done_.insert(a.nodes.begin(), a.nodes.end());
        const int last = *a.nodes.rbegin();
        done_.erase(last);
        attention_[last] = std::move(a);
      }
    } catch (const Unsupported& e) {
      failures_.push_back("Softmax (node '" + node_name(n) + "'): the weights of a scaled dot-product attention whose block is not imported: " + e.what());
      done_.insert(k);
      poison(n);
    }
  }
}

// The block around the Softmax node `k` (see above); throws Unsupported with the reason.
AttentionBlock Importer::match_attention(int k) const {
  const onnx::NodeProto& sm = g_.node(k);
  AttentionBlock a;
  std::set<int>& nodes = a.nodes;
  nodes.insert(k);
  for (const auto& at : sm.attribute())
    if (at.name() != "axis" || at.i() != -1) throw Unsupported("the Softmax is not over the last axis (axis -1)");
  if (opset_ < 13) throw Unsupported("the model's opset " + std::to_string(opset_) + " (attention is imported from opset 13 on)");
  // the weighted sum: Softmax read by one MatMul as its left operand (Loom's exporter with a
  // padding mask: through Where(Equal(ReduceMax(scores), -inf), 0, weights), which makes a
  // query that sees no key weigh 0)
  const auto float_is = [&](const std::string& c, double want) {
    auto it = consts_.find(c);
    return it != consts_.end() && it->second.numel() == 1 && is_floating(it->second.dtype()) && scalar_of(it->second) == want;
  };
  std::string weights = sm.output(0);
  bool zeroed = false;
  int km = only_reader(weights);
  if (km >= 0 && g_.node(km).op_type() == "Where" && g_.node(km).domain().empty() && g_.node(km).input_size() == 3 &&
      g_.node(km).input(2) == weights && g_.node(km).output_size() == 1 && float_is(g_.node(km).input(1), 0)) {
    nodes.insert(km);
    const auto& eq = need(g_.node(km).input(0), "Equal", nodes, "the weights of queries that see no key");
    const auto& top = need(eq.input_size() == 2 ? eq.input(0) : std::string(), "ReduceMax", nodes, "the weights of queries that see no key");
    if (!float_is(eq.input(1), -std::numeric_limits<double>::infinity()) || top.input_size() != 1 || top.input(0) != sm.input(0))
      throw Unsupported("the attention weights are zeroed (Where) other than where a query's scores are all -inf");
    zeroed = true;
    weights = g_.node(km).output(0);
    km = only_reader(weights);
  }
  if (km < 0 || g_.node(km).op_type() != "MatMul" || g_.node(km).input(0) != weights || g_.node(km).input_size() != 2)
    throw Unsupported("the attention weights are read by other than one MatMul with the values (they are an output, or averaged, or dropped out)");
  nodes.insert(km);
  const onnx::NodeProto& pv = g_.node(km);
  double scale = 1;
  std::string causal_q, causal_k;
  std::string scores = peel_scale(loom_masks(peel_scale(sm.input(0), scale, nodes), a, nodes), scale, nodes);
  if (a.causal) causal_q = a.q, causal_k = a.k;
  if (zeroed && a.keep.empty()) throw Unsupported("the attention weights are zeroed (Where) without a padding mask");
  int kqk = 0;
  const onnx::NodeProto* qk = producer_of(scores, &kqk);
  if (!qk || qk->op_type() != "MatMul" || !qk->domain().empty() || qk->input_size() != 2) {
    if (qk && (qk->op_type() == "Add" || qk->op_type() == "Where"))
      throw Unsupported("a mask on the scores (" + qk->op_type() + ", node '" + node_name(*qk) + "': attn_mask or key_padding_mask) is not imported");
    throw Unsupported("the scores '" + scores + "' are not a MatMul of the queries and keys");
  }
  nodes.insert(kqk);
  const std::string qs = peel_scale(qk->input(0), scale, nodes), ks = peel_scale(qk->input(1), scale, nodes);
  int kt = 0;
  const onnx::NodeProto* qt = producer_of(qs, &kt);
  if (!qt || qt->op_type() != "Transpose") throw Unsupported("the queries '" + qs + "' are not a Transpose of heads");
  int64_t d = 0;
  const std::vector<int64_t> qperm = perm_of(*qt);
  if (qperm == std::vector<int64_t>{0, 2, 1, 3}) {  // Loom's exporter
    loom_block(a, pv, qs, ks, d, nodes);
    if (a.causal && (causal_q != a.q || causal_k != a.k)) throw Unsupported("the causal mask is computed from other values than the queries and keys");
  } else {  // torch.onnx
    if (a.causal || !a.keep.empty()) throw Unsupported("a mask on the scores (Where) in torch.onnx's form is not imported");
    torch_heads(a, pv, qs, ks, d, nodes);
  }
  check_attention(a, d, scale);
  return a;
}

// Mul or Div of `v` by a scalar constant: peeled off, its factor multiplied into `scale`.
std::string Importer::peel_scale(const std::string& v, double& scale, std::set<int>& nodes) const {
  int k = 0;
  const onnx::NodeProto* n = producer_of(v, &k);
  if (!n || !n->domain().empty() || (n->op_type() != "Mul" && n->op_type() != "Div") || n->input_size() != 2) return v;
  const bool div = n->op_type() == "Div";
  const int ci = consts_.count(n->input(1)) ? 1 : (!div && consts_.count(n->input(0)) ? 0 : -1);
  if (ci < 0) return v;
  const Tensor& c = consts_.at(n->input(ci));
  if (c.numel() != 1 || !is_floating(c.dtype())) return v;
  const double f = scalar_of(c);
  if (!(f != 0 && std::isfinite(f))) return v;
  scale *= div ? 1.0 / f : f;
  nodes.insert(k);
  return n->input(1 - ci);
}

// y = x W (+ b) as Loom's exporter or torch.onnx write a projection: MatMul by a constant (E_in,
// E_out) matrix, then an Add of a constant bias (either operand order), or Gemm (transB). Returns x.
std::string Importer::projection(const std::string& y, Tensor& w, Tensor& b, std::set<int>& nodes, const std::string& what) const {
  int k = 0;
  const onnx::NodeProto* n = producer_of(y, &k);
  std::string mm = y;
  if (n && n->op_type() == "Add" && n->domain().empty() && n->input_size() == 2) {
    const int ci = consts_.count(n->input(1)) ? 1 : consts_.count(n->input(0)) ? 0 : -1;
    if (ci >= 0) {
      b = consts_.at(n->input(ci));
      nodes.insert(k);
      mm = n->input(1 - ci);
      n = producer_of(mm, &k);
    }
  }
  if (n && n->op_type() == "Gemm" && n->domain().empty() && !b.defined()) {
    for (const auto& a : n->attribute())
      if (!((a.name() == "alpha" || a.name() == "beta") && a.f() == 1.0f) && !(a.name() == "transB") && !(a.name() == "transA" && a.i() == 0))
        throw Unsupported(what + ": the Gemm (node '" + node_name(*n) + "') has the attribute " + a.name() + " set otherwise than a projection");
    if (n->input_size() < 2 || !consts_.count(n->input(1))) throw Unsupported(what + ": the Gemm's B is not an initializer");
    w = consts_.at(n->input(1));
    if (w.ndim() != 2) throw Unsupported(what + ": the weights of the shape " + shape_str(w.shape()));
    if (int_attr_of(*n, "transB", 0) != 0) w = transpose(w).contiguous();
    if (n->input_size() > 2 && !n->input(2).empty()) {
      if (!consts_.count(n->input(2))) throw Unsupported(what + ": the Gemm's C is not an initializer");
      b = consts_.at(n->input(2));
    }
    nodes.insert(k);
    return n->input(0);
  }
  if (!n || n->op_type() != "MatMul" || !n->domain().empty() || n->input_size() != 2 || !consts_.count(n->input(1)))
    throw Unsupported(what + ": '" + mm + "' is not a MatMul by an initializer (a projection)");
  w = consts_.at(n->input(1));
  if (w.ndim() != 2) throw Unsupported(what + ": the weights of the shape " + shape_str(w.shape()) + " (a projection's are (in, out))");
  nodes.insert(k);
  return n->input(0);
}

// A bias of `units` values (any shape of ones but the last), as (units); undefined stays undefined.
Tensor Importer::bias_vector(const Tensor& b, int64_t units, const std::string& what) {
  if (!b.defined()) return b;
  for (size_t i = 0; i + 1 < b.shape().size(); ++i)
    if (b.shape()[i] != 1) throw Unsupported(what + ": the bias of the shape " + shape_str(b.shape()) + ", not (" + std::to_string(units) + ")");
  if (b.numel() != units) throw Unsupported(what + ": the bias of the shape " + shape_str(b.shape()) + ", not (" + std::to_string(units) + ")");
  return b.reshape({units}).contiguous();
}

// Loom's exporter's heads of one projection: Transpose (0, 2, 1, 3) of Reshape (0, 0, H, d) of
// x W (+ b). Returns x; sets heads and d.
std::string Importer::loom_heads(const std::string& t, Tensor& w, Tensor& b, int64_t& heads, int64_t& d, std::set<int>& nodes, const std::string& what) const {
  const auto& tr = need(t, "Transpose", nodes, what);
  need_perm(tr, {0, 2, 1, 3}, what);
  const auto& r = need(tr.input(0), "Reshape", nodes, what);
  if (r.input_size() != 2 || !consts_.count(r.input(1))) throw Unsupported(what + ": the Reshape (node '" + node_name(r) + "') has no constant shape");
  for (const auto& a : r.attribute())
    if (a.name() != "allowzero" || a.i() != 0) throw Unsupported(what + ": the Reshape's attribute " + a.name());
  const std::vector<int64_t> s = ints_of(consts_.at(r.input(1)));
  if (s.size() != 4 || s[0] != 0 || s[1] != 0 || s[2] < 1 || s[3] < 1)
    throw Unsupported(what + ": the Reshape (node '" + node_name(r) + "') to " + ints_str(s) + " (the heads' split is (0, 0, heads, head size))");
  heads = s[2];
  d = s[3];
  return projection(r.input(0), w, b, nodes, what);
}

// Loom's exporter's masks on the scores, Where(mask, -inf, scores): the causal one (Greater of
// the key and query positions, Range over Shape of the query and key inputs) and the padding
// one (Not of the keep mask Cast to bool and Unsqueezed (1, 2)). Returns the scores under them.
std::string Importer::loom_masks(std::string s, AttentionBlock& a, std::set<int>& nodes) const {
  const auto minus_inf = [&](const std::string& c) {
    auto it = consts_.find(c);
    if (it == consts_.end() || it->second.numel() != 1 || !is_floating(it->second.dtype())) return false;
    const double v = scalar_of(it->second);
    return std::isinf(v) && v < 0;
  };
  const auto positions = [&](const std::string& r, std::string& of) {  // Range(0, Squeeze(Shape(of)[1:2], 0), 1)
    const auto& range = need(r, "Range", nodes, "the causal mask");
    if (range.input_size() != 3 || !const_is(range.input(0), {0}, {}) || !const_is(range.input(2), {1}, {}))
      throw Unsupported("the causal mask: the Range (node '" + node_name(range) + "') is not from 0 by 1");
    const auto& sq = need(range.input(1), "Squeeze", nodes, "the causal mask");
    if (!squeeze_axis(0)(sq)) throw Unsupported("the causal mask: the Squeeze (node '" + node_name(sq) + "') is not of axis 0");
    const auto& sh = need(sq.input(0), "Shape", nodes, "the causal mask");
    if (sh.input_size() != 1 || sh.attribute_size() != 2 || int_attr_of(sh, "start", -1) != 1 || int_attr_of(sh, "end", -1) != 2)
      throw Unsupported("the causal mask: the Shape (node '" + node_name(sh) + "') is not the length (start 1, end 2)");
    of = sh.input(0);
  };
  for (int k = 0, steps = 0;; ++steps) {
    const onnx::NodeProto* w = producer_of(s, &k);
    if (!w || w->op_type() != "Where" || !w->domain().empty()) return s;
    if (steps == 2) throw Unsupported("more than two masks (Where) on the scores");  // Loom writes at most two (and a cyclic file stops here)
    if (w->input_size() != 3 || !minus_inf(w->input(1)))
      throw Unsupported("a Where (node '" + node_name(*w) + "') on the scores that is not a mask to -inf");
    nodes.insert(k);
    int kc = 0;
    const onnx::NodeProto* c = producer_of(w->input(0), &kc);
    if (c && c->op_type() == "Greater" && c->input_size() == 2 && !a.causal) {
      nodes.insert(kc);
      const auto& un = need(c->input(1), "Unsqueeze", nodes, "the causal mask");
      if (!(un.input_size() == 2 && const_is(un.input(1), {1}, {1})))
        throw Unsupported("the causal mask: the Unsqueeze (node '" + node_name(un) + "') is not of axis 1");
      std::string lq, lk;
      positions(un.input(0), lq);
      positions(c->input(0), lk);
      a.causal = true;
      a.q = lq;  // checked against the projections' inputs by the caller
      a.k = lk;
    } else if (c && c->op_type() == "Not" && c->input_size() == 1 && a.keep.empty()) {
      nodes.insert(kc);
      const auto& un = need(c->input(0), "Unsqueeze", nodes, "the padding mask");
      if (!(un.input_size() == 2 && const_is(un.input(1), {1, 2}, {2})))
        throw Unsupported("the padding mask: the Unsqueeze (node '" + node_name(un) + "') is not of axes (1, 2)");
      const auto& cast = need(un.input(0), "Cast", nodes, "the padding mask");
      if (cast.input_size() != 1 || int_attr_of(cast, "to", 0) != onnx::TensorProto::BOOL)
        throw Unsupported("the padding mask: the Cast (node '" + node_name(cast) + "') is not to bool");
      a.keep = cast.input(0);
    } else {
      throw Unsupported("a mask on the scores (Where, node '" + node_name(*w) + "') that is neither Loom's causal nor its padding mask");
    }
    s = w->input(2);
  }
}

// Loom's exporter's form, from the queries `qs` (N, H, L, d) and the keys `ks`: each of q, k, v
// split into heads by loom_heads, the weighted sum `pv` put back into (N, L, E) and projected.
void Importer::loom_block(AttentionBlock& a, const onnx::NodeProto& pv, const std::string& qs, const std::string& ks, int64_t& d, std::set<int>& nodes) const {
  int64_t hq = 0, hk = 0, hv = 0, dq = 0, dk = 0, dv = 0;
  a.q = loom_heads(qs, a.wq, a.bq, hq, dq, nodes, "the query projection");
  const auto& kt2 = need(ks, "Transpose", nodes, "the keys");
  need_perm(kt2, {0, 1, 3, 2}, "the keys");
  a.k = loom_heads(kt2.input(0), a.wk, a.bk, hk, dk, nodes, "the key projection");
  a.v = loom_heads(pv.input(1), a.wv, a.bv, hv, dv, nodes, "the value projection");
  if (hq != hk || hq != hv || dq != dk || dq != dv)
    throw Unsupported("the queries, keys and values are split into different heads " + ints_str({hq, dq}) + ", " + ints_str({hk, dk}) + ", " +
                      ints_str({hv, dv}));
  a.heads = hq;
  d = dq;
  const int kot = only_reader(pv.output(0));
  if (kot < 0 || g_.node(kot).op_type() != "Transpose") throw Unsupported("the attended values are not Transposed (0, 2, 1, 3) (the heads back)");
  need_perm(g_.node(kot), {0, 2, 1, 3}, "the attended values");
  nodes.insert(kot);
  const int kr = only_reader(g_.node(kot).output(0));
  if (kr < 0 || g_.node(kr).op_type() != "Reshape" || g_.node(kr).input_size() != 2 || !const_is(g_.node(kr).input(1), {0, 0, hq * dq}, {3}))
    throw Unsupported("the attended values are not Reshaped to (0, 0, " + std::to_string(hq * dq) + ") (the heads concatenated)");
  nodes.insert(kr);
  a.out = out_projection(g_.node(kr).output(0), a, nodes);
}

// The block's weights (E, E), its heads making E, its biases all or none, its scale 1/sqrt(d), and
// closed: its values read by its own nodes only, but its output.
void Importer::check_attention(AttentionBlock& a, int64_t d, double scale) const {
  std::set<int>& nodes = a.nodes;
  const int64_t e = a.wq.defined() ? a.wq.shape()[0] : 0;
  for (const Tensor* w : {&a.wq, &a.wk, &a.wv, &a.wo})
    if (w->shape() != Shape{e, e}) throw Unsupported("a projection's weights of the shape " + shape_str(w->shape()) + " (valid: (E, E), E the units)");
  if (a.heads < 1 || d < 1 || a.heads * d != e) throw Unsupported(std::to_string(a.heads) + " heads of " + std::to_string(d) + " do not make " + std::to_string(e) + " units");
  const bool bias = a.bq.defined();
  if (a.bk.defined() != bias || a.bv.defined() != bias || a.bo.defined() != bias)
    throw Unsupported("some projections have a bias and others none (Loom's MultiHeadAttention has all four or none)");
  a.bq = bias_vector(a.bq, e, "the query projection");
  a.bk = bias_vector(a.bk, e, "the key projection");
  a.bv = bias_vector(a.bv, e, "the value projection");
  a.bo = bias_vector(a.bo, e, "the out projection");
  if (std::abs(scale * std::sqrt(static_cast<double>(d)) - 1) > 1e-6)
    throw Unsupported("the scores are scaled by " + std::to_string(scale) + ", not 1/sqrt(" + std::to_string(d) + ") (the head size)");
  // closed: the block's values are read by its own nodes only, but its output
  for (int m : nodes)
    for (const auto& o : g_.node(m).output()) {
      if (o.empty() || o == a.out) continue;
      if (is_graph_output(o)) throw Unsupported("the block's value '" + o + "' is a graph output");
      for (int r : readers_of(o))
        if (!nodes.count(r)) throw Unsupported("the block's value '" + o + "' is read by the node '" + node_name(g_.node(r)) + "' outside it");
    }
  int last = 0;
  if (!producer_of(a.out, &last) || *nodes.rbegin() != last) throw Unsupported("the block's nodes are not in topological order");
}

// The out projection reading the concatenated heads `c`: MatMul (+ Add) or Gemm; returns its value.
std::string Importer::out_projection(const std::string& c, AttentionBlock& a, std::set<int>& nodes) const {
  const int kp = only_reader(c);
  if (kp < 0) throw Unsupported("the concatenated heads '" + c + "' are read by more than the out projection");
  std::string y = g_.node(kp).output(0);
  if (const int ka = only_reader(y); ka >= 0 && g_.node(ka).op_type() == "Add" && g_.node(kp).op_type() == "MatMul" && g_.node(ka).input_size() == 2 &&
                                     (consts_.count(g_.node(ka).input(0)) || consts_.count(g_.node(ka).input(1))))
    y = g_.node(ka).output(0);
  if (projection(y, a.wo, a.bo, nodes, "the out projection") != c) throw Unsupported("the out projection does not read the concatenated heads");
  return y;
}

void Importer::set_attention_params(const nn::Layer& l, const std::string& prefix, const AttentionBlock& a) {
  param(l, prefix + "q_weight", a.wq);
  param(l, prefix + "k_weight", a.wk);
  param(l, prefix + "v_weight", a.wv);
  param(l, prefix + "out_weight", a.wo);
  if (a.bq.defined()) {
    param(l, prefix + "q_bias", a.bq);
    param(l, prefix + "k_bias", a.bk);
    param(l, prefix + "v_bias", a.bv);
    param(l, prefix + "out_bias", a.bo);
  }
}

bool Importer::poisoned_any(std::initializer_list<std::string> vs) {
  for (const std::string& v : vs)
    if (!v.empty() && poisoned_.count(v)) {
      poison(*node_);
      return true;
    }
  return false;
}

void Importer::import_attention(const AttentionBlock& a) {
  if (poisoned_any({a.q, a.k, a.v, a.keep})) return;
  const nn::Layer q = floating(value_named(a.q)), k = floating(value_named(a.k)), v = floating(value_named(a.v));
  for (const nn::Layer* x : {&q, &k, &v})
    if (rank_of(*x) != 3 || x->shape()[2] != a.wq.shape()[0])
      throw Unsupported("an input of the shape " + shape_str(x->shape()) + " (the attention reads (batch, length, " + std::to_string(a.wq.shape()[0]) + "))");
  std::optional<nn::Layer> keep;
  if (!a.keep.empty()) keep = value_named(a.keep);
  nn::MultiHeadAttention l(q, k, v, a.heads, {.causal = a.causal, .bias = a.bq.defined()}, keep, unique(a.out));
  set_attention_params(l, "", a);
  set(a.out, l);
}

void Importer::import_encoder(const EncoderBlock& e) {
  if (poisoned_any({e.x, e.att.keep})) return;
  const nn::Layer x = floating(value_named(e.x));
  const int64_t units = e.att.wq.shape()[0];
  if (rank_of(x) != 3 || x.shape()[2] != units)
    throw Unsupported("an input of the shape " + shape_str(x.shape()) + " (the encoder layer reads (batch, length, " + std::to_string(units) + "))");
  nn::TransformerOptions o;
  o.ff_units = e.w1.shape()[1];
  o.dropout = 0;  // the file holds inference semantics
  o.activation = e.act;
  o.norm_first = e.norm_first;
  o.eps = e.eps;
  o.causal = e.att.causal;
  std::optional<nn::Layer> keep;
  if (!e.att.keep.empty()) keep = value_named(e.att.keep);
  nn::TransformerEncoderLayer l(x, e.att.heads, o, keep, unique(e.out));
  set_attention_params(l, "self_attention/", e.att);
  param(l, "ff/w1", e.w1);
  param(l, "ff/b1", e.b1);
  param(l, "ff/w2", e.w2);
  param(l, "ff/b2", e.b2);
  param(l, "norm1/weight", e.n1w);
  param(l, "norm1/bias", e.n1b);
  param(l, "norm2/weight", e.n2w);
  param(l, "norm2/bias", e.n2b);
  set(e.out, l);
}

}  // namespace loom::io::detail
