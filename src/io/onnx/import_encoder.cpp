// ONNX import, a TransformerEncoderLayer (importer.h, import_patterns.h): the residual Adds, the
// two LayerNormalizations and the feed-forward around a self-attention block
// (import_attention.cpp), post-norm or norm_first, as one layer.
#include "io/onnx/importer.h"

#include "loom/core/error.h"

namespace loom::io::detail {

// A feed-forward activation reading `h`: Relu, or gelu's Erf formula (Loom's or torch's).
// Returns its value; sets act and adds its nodes.
std::optional<std::string> Importer::activation_after(const std::string& h, nn::ActivationFn& act, std::set<int>& nodes) const {
  const std::vector<int> r = readers_of(h);
  if (r.size() == 1 && g_.node(r[0]).op_type() == "Relu" && g_.node(r[0]).domain().empty() && g_.node(r[0]).attribute_size() == 0 && g_.node(r[0]).output_size() == 1) {
    nodes.insert(r[0]);
    act = nn::relu;
    return g_.node(r[0]).output(0);
  }
  for (int k : r) {
    std::vector<int> ks;
    std::string y;
    if (gelu_at(k, h, y, ks)) {
      std::set<int> all(ks.begin(), ks.end());
      all.insert(k);
      // h read by the gelu's nodes only
      for (int m : r)
        if (!all.count(m)) return std::nullopt;
      nodes.insert(all.begin(), all.end());
      act = nn::gelu;
      return y;
    }
  }
  return std::nullopt;
}

// A TransformerEncoderLayer around the self-attention block `a` (post-norm or norm_first):
// the residual Adds, the two LayerNormalizations (one epsilon) and the feed-forward
// (MatMul + Add, Relu or gelu, MatMul + Add), each value read inside the block only.
std::optional<EncoderBlock> Importer::match_encoder(const AttentionBlock& a) const {
  if (a.q != a.k || a.q != a.v) return std::nullopt;
  EncoderBlock e;
  e.att = a;
  e.nodes = a.nodes;
  double eps1 = 0, eps2 = 0;
  const EncoderForm first = norm_first_encoder(e, eps1, eps2);
  if (first == EncoderForm::Refused) return std::nullopt;
  if (first == EncoderForm::Other && !post_norm_encoder(e, eps1, eps2)) return std::nullopt;
  if (eps1 != eps2) return std::nullopt;  // Loom's layer has one epsilon
  e.eps = eps1;
  // closed, as the attention block
  for (int m : e.nodes)
    for (const auto& o : g_.node(m).output()) {
      if (o.empty() || o == e.out) continue;
      if (is_graph_output(o)) return std::nullopt;
      for (int r : readers_of(o))
        if (!e.nodes.count(r)) return std::nullopt;
    }
  int last = 0;
  if (!producer_of(e.out, &last) || *e.nodes.rbegin() != last) return std::nullopt;
  return e;
}

// norm_first: x -> LN -> attention -> Add x -> LN -> feed-forward -> Add. Other when the
// attention's input is not a LayerNormalization read by the block only.
EncoderForm Importer::norm_first_encoder(EncoderBlock& e, double& eps1, double& eps2) const {
  const AttentionBlock& a = e.att;
  int k1 = 0, k2 = 0, kl1 = 0;
  const onnx::NodeProto* ln_in = producer_of(a.q, &kl1);
  if (!ln_in || !encoder_norm(*ln_in, a, e.n1w, e.n1b, eps1) || readers_of(a.q).empty()) return EncoderForm::Other;
  bool inside = !is_graph_output(a.q);
  for (int r : readers_of(a.q)) inside = inside && a.nodes.count(r);
  if (!inside) return EncoderForm::Other;
  e.norm_first = true;
  e.x = ln_in->input(0);
  e.nodes.insert(kl1);
  const onnx::NodeProto* r1 = residual_add(a.out, e.x, k1);
  if (!r1 || only_reader(a.out) != k1) return EncoderForm::Refused;
  e.nodes.insert(k1);
  const std::vector<int> rr = readers_of(r1->output(0));
  if (rr.size() != 2 || is_graph_output(r1->output(0))) return EncoderForm::Refused;
  const int kl2 = g_.node(rr[0]).op_type() == "LayerNormalization" ? rr[0] : rr[1];
  if (!encoder_norm(g_.node(kl2), a, e.n2w, e.n2b, eps2) || only_reader(g_.node(kl2).output(0)) < 0) return EncoderForm::Refused;
  e.nodes.insert(kl2);
  std::string f;
  if (!feed_forward(g_.node(kl2).output(0), e, f)) return EncoderForm::Refused;
  const onnx::NodeProto* r2 = residual_add(f, r1->output(0), k2);
  if (!r2 || only_reader(f) != k2) return EncoderForm::Refused;
  e.nodes.insert(k2);
  e.out = r2->output(0);
  return EncoderForm::Matched;
}

// post-norm: attention -> Add x -> LN -> feed-forward -> Add -> LN.
bool Importer::post_norm_encoder(EncoderBlock& e, double& eps1, double& eps2) const {
  const AttentionBlock& a = e.att;
  int k1 = 0, k2 = 0;
  e.x = a.q;
  const onnx::NodeProto* r1 = residual_add(a.out, e.x, k1);
  if (!r1 || only_reader(a.out) != k1) return false;
  e.nodes.insert(k1);
  const int kl1 = only_reader(r1->output(0));
  if (kl1 < 0 || !encoder_norm(g_.node(kl1), a, e.n1w, e.n1b, eps1)) return false;
  e.nodes.insert(kl1);
  const std::string x1 = g_.node(kl1).output(0);
  if (readers_of(x1).size() != 2 || is_graph_output(x1)) return false;
  std::string f;
  if (!feed_forward(x1, e, f)) return false;
  const onnx::NodeProto* r2 = residual_add(f, x1, k2);
  if (!r2 || only_reader(f) != k2) return false;
  e.nodes.insert(k2);
  const int kl2 = only_reader(r2->output(0));
  if (kl2 < 0 || !encoder_norm(g_.node(kl2), a, e.n2w, e.n2b, eps2)) return false;
  e.nodes.insert(kl2);
  e.out = g_.node(kl2).output(0);
  return true;
}

// The Add of `v` and `other` (either order) among v's readers; *k its index.
const onnx::NodeProto* Importer::residual_add(const std::string& v, const std::string& other, int& k) const {
  for (int m : readers_of(v)) {
    const auto& n = g_.node(m);
    if (n.op_type() == "Add" && n.domain().empty() && n.input_size() == 2 && n.output_size() == 1 &&
        ((n.input(0) == v && n.input(1) == other) || (n.input(1) == v && n.input(0) == other))) {
      k = m;
      return &n;
    }
  }
  return nullptr;
}

// Whether `n` is a LayerNormalization over the last axis of the block's units, its scale and bias
// initializers (into w, b), its Mean and InvStdDev unused; eps its epsilon.
bool Importer::encoder_norm(const onnx::NodeProto& n, const AttentionBlock& a, Tensor& w, Tensor& b, double& eps) const {
  if (n.op_type() != "LayerNormalization" || !n.domain().empty() || n.input_size() != 3 || n.output_size() < 1 || !consts_.count(n.input(1)) || !consts_.count(n.input(2)))
    return false;
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty() && uses_.count(n.output(i))) return false;
  for (const auto& at : n.attribute())
    if (!(at.name() == "axis" && at.i() == -1) && at.name() != "epsilon" && !(at.name() == "stash_type" && at.i() == 1)) return false;
  w = consts_.at(n.input(1));
  b = consts_.at(n.input(2));
  const int64_t units = a.wq.shape()[0];
  if (w.shape() != Shape{units} || b.shape() != Shape{units}) return false;
  float f = 1e-5f;
  for (const auto& at : n.attribute())
    if (at.name() == "epsilon") f = at.f();
  eps = float_attr(f);
  return true;
}

// The feed-forward reading `h`: MatMul + Add, the activation, MatMul + Add, its weights (units,
// ff) and (ff, units) with biases; f its value. Sets e's weights, activation and nodes.
bool Importer::feed_forward(const std::string& h, EncoderBlock& e, std::string& f) const {
  int km = -1;
  for (int m : readers_of(h))
    if (g_.node(m).op_type() == "MatMul" && g_.node(m).input(0) == h && g_.node(m).output_size() == 1) km = m;
  if (km < 0) return false;
  Tensor w1, b1, w2, b2;
  std::set<int> ff;
  ff.insert(km);
  const int ka = only_reader(g_.node(km).output(0));
  if (ka < 0) return false;
  try {
    if (projection(g_.node(ka).output(0), w1, b1, ff, "ff") != h) return false;
    auto act = activation_after(g_.node(ka).output(0), e.act, ff);
    if (!act) return false;
    const int k2 = only_reader(*act);
    if (k2 < 0 || g_.node(k2).op_type() != "MatMul") return false;
    const int k3 = only_reader(g_.node(k2).output(0));
    if (k3 < 0) return false;
    if (projection(g_.node(k3).output(0), w2, b2, ff, "ff") != *act) return false;
    f = g_.node(k3).output(0);
  } catch (const Unsupported&) {
    return false;
  }
  const int64_t units = e.att.wq.shape()[0];
  if (!b1.defined() || !b2.defined() || w1.shape()[0] != units || w2.shape() != Shape{w1.shape()[1], units}) return false;
  try {
    e.b1 = bias_vector(b1, w1.shape()[1], "ff");
    e.b2 = bias_vector(b2, units, "ff");
  } catch (const Unsupported&) {
    return false;
  }
  e.w1 = w1;
  e.w2 = w2;
  e.nodes.insert(ff.begin(), ff.end());
  return true;
}

}  // namespace loom::io::detail
