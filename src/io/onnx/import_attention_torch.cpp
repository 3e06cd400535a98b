// ONNX import, torch.onnx's form of nn.MultiheadAttention (import_attention.cpp describes it): its
// q, k and v heads, each from a projection that may be a slice of torch's packed in-projection,
// and the shape arithmetic around them evaluated at two probe sizes.
#include "io/onnx/importer.h"

#include <algorithm>
#include <array>

#include "loom/core/error.h"
#include "loom/ops/manipulation.h"

namespace loom::io::detail {

// torch.onnx's form, from its queries (N H, L, d) and keys (N H, d, S). Each of q, k and v is
// Reshape(Slice(projection)) (a slice of a packed projection: q, k and v of self-attention from one
// (E, 3E) matrix, k and v of cross-attention from one (E, 2E)) or Reshape(projection); a projection
// is MatMul (+ Add) of the Transpose (1, 0, 2) of a batch-first input by an initializer, or by the
// Transpose (1, 0) of a Slice of one (the rows of torch's in_proj_weight), its bias an initializer
// or a Slice of one.

// Slice of an initializer along axis 0 with bounds evaluated at a probe: [start, end).
std::pair<int64_t, int64_t> Importer::initializer_rows(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes) const {
  const onnx::NodeProto& s = *producer_of(v);
  const Tensor& t = consts_.at(s.input(0));
  std::vector<std::optional<std::vector<int64_t>>> b;
  for (int j = 1; j < s.input_size(); ++j) b.push_back(eval_ints(s.input(j), shapes, nodes));
  for (const auto& x : b)
    if (!x || x->size() != 1) throw Unsupported("the Slice (node '" + node_name(s) + "') has bounds the importer cannot evaluate");
  if (b.size() < 2 || (b.size() > 2 && (*b[2])[0] != 0) || (b.size() > 3 && (*b[3])[0] != 1))
    throw Unsupported("the Slice (node '" + node_name(s) + "') of the weights is not of rows (axis 0, step 1)");
  const int64_t rows = t.shape().empty() ? 0 : t.shape()[0];
  const int64_t lo = std::clamp((*b[0])[0] < 0 ? (*b[0])[0] + rows : (*b[0])[0], int64_t{0}, rows),
                hi = std::clamp((*b[1])[0] < 0 ? (*b[1])[0] + rows : (*b[1])[0], int64_t{0}, rows);
  if (hi <= lo) throw Unsupported("the Slice (node '" + node_name(s) + "') of the weights is empty");
  return {lo, hi};
}

bool Importer::slice_of_initializer(const std::string& v) const {
  const onnx::NodeProto* s = producer_of(v);
  return s && s->op_type() == "Slice" && s->domain().empty() && s->input_size() >= 3 && consts_.count(s->input(0)) && s->output_size() == 1;
}

TorchHead Importer::torch_head(const std::string& t, const std::vector<int64_t>& perm, const std::string& what, std::set<int>& nodes) const {
  TorchHead h;
  const auto& tr = need(t, "Transpose", nodes, what);
  need_perm(tr, perm, what);
  const auto& r = need(tr.input(0), "Reshape", nodes, what);
  for (const auto& at : r.attribute())
    if (at.name() != "allowzero" || at.i() != 0) throw Unsupported(what + ": the Reshape's attribute " + at.name());
  if (r.input_size() != 2) throw Unsupported(what + ": the Reshape has no shape");
  h.reshape = tr.input(0);
  h.proj = r.input(0);
  int k = 0;
  if (const onnx::NodeProto* s = producer_of(h.proj, &k); s && s->op_type() == "Slice" && s->input_size() >= 1 && !consts_.count(s->input(0))) {
    if (s->input_size() < 3 || s->input_size() > 5) throw Unsupported(what + ": the Slice (node '" + node_name(*s) + "') has " + std::to_string(s->input_size()) + " inputs");
    nodes.insert(k);
    h.slice = h.proj;
    h.proj = s->input(0);
  }
  // the projection: MatMul (+ Add of the bias)
  h.mm = h.proj;
  if (const onnx::NodeProto* a = producer_of(h.proj, &k); a && a->op_type() == "Add" && a->domain().empty() && a->input_size() == 2) {
    const int bi = (consts_.count(a->input(0)) || slice_of_initializer(a->input(0))) ? 0 : (consts_.count(a->input(1)) || slice_of_initializer(a->input(1))) ? 1 : -1;
    if (bi < 0) throw Unsupported(what + ": the Add (node '" + node_name(*a) + "') after the projection adds no constant bias");
    nodes.insert(k);
    if (consts_.count(a->input(bi))) h.b = consts_.at(a->input(bi));
    else h.b_slice = a->input(bi), nodes.insert(producer_.at(a->input(bi)));
    h.mm = a->input(1 - bi);
  }
  const auto& mm = need(h.mm, "MatMul", nodes, what + " (the projection)");
  if (mm.input_size() != 2) throw Unsupported(what + ": the MatMul has " + std::to_string(mm.input_size()) + " inputs");
  if (consts_.count(mm.input(1))) {
    h.w = consts_.at(mm.input(1));
    if (h.w.ndim() != 2) throw Unsupported(what + ": the projection's weights of the shape " + shape_str(h.w.shape()));
  } else {
    const auto& wt = need(mm.input(1), "Transpose", nodes, what + " (the projection's weights)");
    need_perm(wt, {1, 0}, what + " (the projection's weights)");
    if (!slice_of_initializer(wt.input(0))) throw Unsupported(what + ": the projection's weights are not an initializer nor a Slice of one");
    nodes.insert(producer_.at(wt.input(0)));
    h.w_slice = wt.input(0);
    if (consts_.at(producer_of(h.w_slice)->input(0)).ndim() != 2) throw Unsupported(what + ": the sliced weights are not a matrix");
  }
  h.xt = mm.input(0);
  const auto& t0 = need(h.xt, "Transpose", nodes, what + "'s input");
  need_perm(t0, {1, 0, 2}, what + "'s input (batch first to (length, N, E))");
  h.x = t0.input(0);
  return h;
}

// The block in torch.onnx's form from its queries `qs` (N H, L, d), keys `ks` (N H, d, S) and
// weighted sum `pv`: its heads (torch_head), its output (torch_output), its shape arithmetic
// checked at two probe sizes (N, L, S) (torch_probe), then the weights each head takes.
void Importer::torch_heads(AttentionBlock& a, const onnx::NodeProto& pv, const std::string& qs, const std::string& ks, int64_t& d, std::set<int>& nodes) const {
  TorchBlock t;
  t.head[0] = torch_head(qs, {1, 0, 2}, "the queries", nodes);
  t.head[1] = torch_head(ks, {1, 2, 0}, "the keys", nodes);
  t.head[2] = torch_head(pv.input(1), {1, 0, 2}, "the values", nodes);
  a.q = t.head[0].x;
  a.k = t.head[1].x;
  a.v = t.head[2].x;
  torch_output(a, pv, t, nodes);
  for (const auto& probe : {std::array<int64_t, 3>{2, 3, 4}, std::array<int64_t, 3>{3, 7, 5}}) torch_probe(a, pv, t, probe, nodes);
  a.heads = t.heads;
  d = t.e / t.heads;
  Tensor* ws[3] = {&a.wq, &a.wk, &a.wv};
  Tensor* bs[3] = {&a.bq, &a.bk, &a.bv};
  for (int i = 0; i < 3; ++i) {
    const TorchHead& h = t.head[i];
    *ws[i] = slice(h.w, 1, t.cols[i][0], t.cols[i][1]).contiguous();
    if (h.b.defined()) {
      const Tensor b = bias_vector(h.b, h.w.shape()[1], i == 0 ? "the query projection" : i == 1 ? "the key projection" : "the value projection");
      *bs[i] = slice(b, 0, t.cols[i][0], t.cols[i][1]).contiguous();
    }
  }
}

// The output: MatMul -> Transpose (1, 0, 2) -> Reshape (L N, E) -> projection -> Reshape (L, N, E)
// -> Transpose (1, 0, 2); sets a.out, a.wo (a.bo) and the units E.
void Importer::torch_output(AttentionBlock& a, const onnx::NodeProto& pv, TorchBlock& t, std::set<int>& nodes) const {
  t.kt1 = only_reader(pv.output(0));
  if (t.kt1 < 0 || g_.node(t.kt1).op_type() != "Transpose") throw Unsupported("the attended values are not Transposed (1, 0, 2)");
  need_perm(g_.node(t.kt1), {1, 0, 2}, "the attended values");
  nodes.insert(t.kt1);
  t.kr1 = only_reader(g_.node(t.kt1).output(0));
  if (t.kr1 < 0 || g_.node(t.kr1).op_type() != "Reshape" || g_.node(t.kr1).input_size() != 2) throw Unsupported("the attended values are not Reshaped to (L N, E)");
  nodes.insert(t.kr1);
  t.y = out_projection(g_.node(t.kr1).output(0), a, nodes);
  t.kr2 = reader_besides_shapes(t.y, "Reshape");
  if (t.kr2 < 0 || g_.node(t.kr2).input_size() != 2) throw Unsupported("the out projection is not Reshaped to (L, N, E)");
  nodes.insert(t.kr2);
  const int kt2 = only_reader(g_.node(t.kr2).output(0));
  if (kt2 < 0 || g_.node(kt2).op_type() != "Transpose") throw Unsupported("the result is not Transposed back to batch first");
  need_perm(g_.node(kt2), {1, 0, 2}, "the result");
  nodes.insert(kt2);
  a.out = g_.node(kt2).output(0);
  t.e = a.wo.defined() && a.wo.ndim() == 2 ? a.wo.shape()[0] : 0;
  if (t.e < 1) throw Unsupported("the out projection's weights of the shape " + shape_str(a.wo.shape()));
}

// The shape arithmetic at one probe size (N, L, S): the columns (and rows) each head takes and its
// split into heads, the same at every probe, and the Reshapes of the output giving (L N, E) and
// (L, N, E).
void Importer::torch_probe(const AttentionBlock& a, const onnx::NodeProto& pv, TorchBlock& t, const std::array<int64_t, 3>& probe,
                           std::set<int>& nodes) const {
  const int64_t n = probe[0], l = probe[1], s_len = a.k == a.q ? l : probe[2], e = t.e;
  ints_memo_.clear();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TorchHead& h : t.head) {  // the inputs first: torch's weight Slices read their shapes
    shapes[h.x] = {n, h.x == a.q ? l : s_len, e};
    shapes[h.xt] = {h.x == a.q ? l : s_len, n, e};
  }
  for (int i = 0; i < 3; ++i) torch_head_at(t, i, n, t.head[i].x == a.q ? l : s_len, shapes, nodes);
  const int64_t heads = t.heads;
  const auto check = [&](int kr, const std::vector<int64_t>& in, const std::vector<int64_t>& want) {
    const auto target = eval_ints(g_.node(kr).input(1), shapes, nodes);
    const auto got = target ? reshaped(in, *target) : std::nullopt;
    if (!got || *got != want)
      throw Unsupported("the Reshape (node '" + node_name(g_.node(kr)) + "') gives " + (got ? ints_str(*got) : std::string("a shape the importer cannot evaluate")) +
                        " at (N, L) = " + ints_str({n, l}) + ", not " + ints_str(want));
    shapes[g_.node(kr).output(0)] = want;
  };
  shapes[pv.output(0)] = {n * heads, l, e / heads};
  shapes[g_.node(t.kt1).output(0)] = {l, n * heads, e / heads};
  check(t.kr1, {l, n * heads, e / heads}, {l * n, e});
  shapes[t.y] = {l * n, e};
  for (int m : nodes)
    if (g_.node(m).output_size() == 1 && g_.node(m).output(0) != t.y && (g_.node(m).op_type() == "Gemm" || g_.node(m).op_type() == "MatMul") &&
        g_.node(m).input(0) == g_.node(t.kr1).output(0))
      shapes[g_.node(m).output(0)] = {l * n, e};
  check(t.kr2, {l * n, e}, {l, n, e});
}

// Head i (q, k, v) at a probe of batch n and its length: the rows of the weights (and bias) it
// slices, the columns of a packed projection, and its Reshape into (L, N heads, E / heads).
void Importer::torch_head_at(TorchBlock& t, int i, int64_t n, int64_t len, std::map<std::string, std::vector<int64_t>>& shapes,
                             std::set<int>& nodes) const {
  TorchHead& h = t.head[i];
  const int64_t e = t.e;
  const std::string hn = i == 0 ? "the queries" : i == 1 ? "the keys" : "the values";
  // the projection's weights (in, cols), at this probe
  if (!h.w_slice.empty()) {
    const auto r = initializer_rows(h.w_slice, shapes, nodes);
    if (!t.rows[i].empty() && t.rows[i] != std::vector<int64_t>{r.first, r.second}) throw Unsupported(hn + ": the weights' Slice takes other rows at another size");
    t.rows[i] = {r.first, r.second};
    h.w = transpose(slice(consts_.at(producer_of(h.w_slice)->input(0)), 0, r.first, r.second)).contiguous();
  }
  if (!h.b_slice.empty()) {
    const auto r = initializer_rows(h.b_slice, shapes, nodes);
    if (!t.brows[i].empty() && t.brows[i] != std::vector<int64_t>{r.first, r.second}) throw Unsupported(hn + ": the bias' Slice takes other values at another size");
    t.brows[i] = {r.first, r.second};
    h.b = slice(consts_.at(producer_of(h.b_slice)->input(0)), 0, r.first, r.second).contiguous();
  }
  const int64_t in = h.w.shape()[0], c = h.w.shape()[1];
  if (in != e) throw Unsupported(hn + ": the projection's weights of the shape " + shape_str(h.w.shape()) + " take " + std::to_string(in) + " features, not " + std::to_string(e));
  shapes[h.x] = {n, len, e};
  shapes[h.xt] = {len, n, e};
  shapes[h.mm] = {len, n, c};
  shapes[h.proj] = {len, n, c};
  if (!h.slice.empty()) {
    const std::vector<int64_t> cols = packed_columns(*producer_of(h.slice), c, e, shapes, nodes);
    if (!t.cols[i].empty() && t.cols[i] != cols) throw Unsupported("the Slice (node '" + node_name(*producer_of(h.slice)) + "') takes other columns at another size");
    t.cols[i] = cols;
    shapes[h.slice] = {len, n, e};
  } else {
    if (c != e) throw Unsupported(hn + ": the projection gives " + std::to_string(c) + " units, not " + std::to_string(e));
    t.cols[i] = {0, e};
  }
  const onnx::NodeProto& rn = *producer_of(h.reshape);
  const auto target = eval_ints(rn.input(1), shapes, nodes);
  if (!target) throw Unsupported("the Reshape (node '" + node_name(rn) + "') has a shape the importer cannot evaluate");
  const auto got = reshaped({len, n, e}, *target);
  if (!got) throw Unsupported("the Reshape (node '" + node_name(rn) + "') to " + ints_str(*target) + " does not fit " + ints_str({len, n, e}));
  const std::vector<int64_t>& s = *got;
  if (s.size() != 3 || s[0] != len || s[1] % n != 0 || s[1] / n < 1 || s[1] / n * s[2] != e || (t.heads && s[1] / n != t.heads))
    throw Unsupported("the Reshape (node '" + node_name(rn) + "') gives " + ints_str(s) + " at (N, L) = " + ints_str({n, len}) +
                      ", not (L, N heads, E / heads) with the same heads for q, k and v");
  t.heads = s[1] / n;
  shapes[h.reshape] = s;
}

// [begin, end) of the c columns of a packed projection that the Slice `sl` takes: E of them, on
// the last axis, without a step.
std::vector<int64_t> Importer::packed_columns(const onnx::NodeProto& sl, int64_t c, int64_t e, const std::map<std::string, std::vector<int64_t>>& shapes,
                                              std::set<int>& nodes) const {
  std::vector<std::optional<std::vector<int64_t>>> v;
  for (int j = 1; j < sl.input_size(); ++j) v.push_back(eval_ints(sl.input(j), shapes, nodes));
  for (const auto& x : v)
    if (!x || x->size() != 1) throw Unsupported("the Slice (node '" + node_name(sl) + "') has bounds the importer cannot evaluate");
  const int64_t axis = v.size() > 2 ? (*v[2])[0] : 0;
  if (axis != 2 && axis != -1) throw Unsupported("the Slice (node '" + node_name(sl) + "') is not on the last axis");
  if (v.size() > 3 && (*v[3])[0] != 1) throw Unsupported("the Slice (node '" + node_name(sl) + "') has a step");
  const int64_t b = std::clamp((*v[0])[0] < 0 ? (*v[0])[0] + c : (*v[0])[0], int64_t{0}, c),
                en = std::clamp((*v[1])[0] < 0 ? (*v[1])[0] + c : (*v[1])[0], int64_t{0}, c);
  if (en - b != e)
    throw Unsupported("the Slice (node '" + node_name(sl) + "') takes " + std::to_string(en - b) + " of the packed projection's columns, not " + std::to_string(e));
  return {b, en};
}

}  // namespace loom::io::detail
