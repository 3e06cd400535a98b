// ONNX import: questions about the model's graph that the converters and pattern matchers ask
// (importer.h): which node computes a value, which read it, whether a value is a given constant,
// a node's permutation, and the chains of single readers the patterns follow.
#include "io/onnx/importer.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"

namespace loom::io::detail {

const onnx::NodeProto* Importer::producer_of(const std::string& v, int* at) const {
  auto it = producer_.find(v);
  if (it == producer_.end()) return nullptr;
  if (at) *at = it->second;
  return &g_.node(it->second);
}

// The node computing `v` when it is `op` of the default domain with one output; throws `why` otherwise.
const onnx::NodeProto& Importer::need(const std::string& v, const char* op, std::set<int>& nodes, const std::string& why) const {
  int k = 0;
  const onnx::NodeProto* n = producer_of(v, &k);
  if (!n || n->op_type() != op || !n->domain().empty() || n->output_size() != 1)
    throw Unsupported(why + ": '" + v + "' is computed by " + (n ? n->op_type() + " (node '" + node_name(*n) + "')" : std::string("no node")) +
                      ", not " + op);
  nodes.insert(k);
  return *n;
}

void Importer::need_perm(const onnx::NodeProto& t, const std::vector<int64_t>& p, const std::string& what) const {
  if (t.input_size() != 1 || t.output_size() != 1 || t.attribute_size() != 1 || perm_of(t) != p) {
    std::string want;
    for (int64_t i : p) want += (want.empty() ? "" : ", ") + std::to_string(i);
    throw Unsupported(what + ": the Transpose (node '" + node_name(t) + "') is not perm (" + want + ")");
  }
}

// The readers of `v`: node indices (a graph output counts as a reader outside every block).
std::vector<int> Importer::readers_of(const std::string& v) const {
  std::vector<int> r;
  if (auto it = readers_.find(v); it != readers_.end())
    for (const auto& [k, i] : it->second) r.push_back(k);
  return r;
}

bool Importer::is_graph_output(const std::string& v) const {
  for (const auto& o : g_.output())
    if (o.name() == v) return true;
  return false;
}

// The one node of `op` reading `v` as its first input when the others reading it are Shape nodes
// (torch.onnx's shape arithmetic, evaluated by the caller), -1 otherwise.
int Importer::reader_besides_shapes(const std::string& v, const char* op) const {
  int found = -1;
  if (is_graph_output(v)) return -1;
  if (auto it = readers_.find(v); it != readers_.end())
    for (const auto& [k, i] : it->second) {
      const auto& n = g_.node(k);
      if (n.op_type() == "Shape" && n.domain().empty()) continue;
      if (found >= 0 || n.op_type() != op || !n.domain().empty() || i != 0 || n.output_size() != 1) return -1;
      found = k;
    }
  return found;
}

// The one node reading `v` (nothing else, no graph output), with one output; -1 otherwise.
int Importer::only_reader(const std::string& v) const {
  const std::vector<int> r = readers_of(v);
  return r.size() == 1 && !is_graph_output(v) && g_.node(r[0]).output_size() == 1 ? r[0] : -1;
}

// The node reading `v` and nothing else reading it; nullptr otherwise. *at: its index.
const onnx::NodeProto* Importer::next(const std::string& v, const char* op, int* at) const {
  const int k = sole_reader(v);
  if (k < 0 || g_.node(k).op_type() != op || !g_.node(k).domain().empty() || g_.node(k).output_size() != 1) return nullptr;
  *at = k;
  return &g_.node(k);
}

// The node reading `v` and nothing else (no graph output) when it is `op` with one output.
const onnx::NodeProto* Importer::next_reader(const std::string& v, const char* op, int* at) const {
  const int k = only_reader(v);
  if (k < 0 || g_.node(k).op_type() != op || !g_.node(k).domain().empty() || g_.node(k).output_size() != 1) return nullptr;
  *at = k;
  return &g_.node(k);
}

// The node of the given operator computing `v` (added to `nodes`); nullptr otherwise.
const onnx::NodeProto* Importer::made_by(const std::string& v, const char* op, std::set<int>& nodes) const {
  auto it = producer_.find(v);
  if (it == producer_.end()) return nullptr;
  const onnx::NodeProto& n = g_.node(it->second);
  if (n.op_type() != op || !n.domain().empty()) return nullptr;
  nodes.insert(it->second);
  return &n;
}

bool Importer::const_near(const std::string& name, double want) const {
  auto it = consts_.find(name);
  return it != consts_.end() && it->second.numel() == 1 && std::abs(scalar_of(it->second) - want) <= 1e-6 * std::abs(want);
}

bool Importer::const_is(const std::string& name, const std::vector<int64_t>& want, const Shape& shape) const {
  auto it = consts_.find(name);
  return it != consts_.end() && is_integral(it->second.dtype()) && it->second.shape() == shape && ints_of(it->second) == want;
}

int64_t Importer::int_attr_of(const onnx::NodeProto& n, const char* name, int64_t dflt) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

std::vector<int64_t> Importer::perm_of(const onnx::NodeProto& n) const {
  for (const auto& a : n.attribute())
    if (a.name() == "perm") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  return {};
}

std::string Importer::ints_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// The node after `v` when it is `op` (sole reader) and satisfies `ok`; nullptr otherwise.
const onnx::NodeProto* Importer::follow(const std::string& v, const char* op, const std::function<bool(const onnx::NodeProto&)>& ok, std::vector<int>& chain) const {
  int k = 0;
  const onnx::NodeProto* n = next(v, op, &k);
  if (!n || !ok(*n)) return nullptr;
  chain.push_back(k);
  return n;
}

std::function<bool(const onnx::NodeProto&)> Importer::perm_is(std::vector<int64_t> p) const {
  return [this, p](const onnx::NodeProto& n) { return n.input_size() == 1 && n.attribute_size() == 1 && perm_of(n) == p; };
}

std::function<bool(const onnx::NodeProto&)> Importer::reshape_to(std::vector<int64_t> s) const {
  return [this, s](const onnx::NodeProto& n) {
    for (const auto& a : n.attribute())
      if (a.name() != "allowzero" || a.i() != 0) return false;
    return n.input_size() == 2 && const_is(n.input(1), s, {static_cast<int64_t>(s.size())});
  };
}

std::function<bool(const onnx::NodeProto&)> Importer::squeeze_axis(int64_t axis) const {
  return [this, axis](const onnx::NodeProto& n) {
    if (n.input_size() == 2) return n.attribute_size() == 0 && const_is(n.input(1), {axis}, {1});
    return n.input_size() == 1 && n.attribute_size() == 1 && n.attribute(0).name() == "axes" && n.attribute(0).ints_size() == 1 &&
           n.attribute(0).ints(0) == axis;
  };
}

}  // namespace loom::io::detail
