#include "loom/io/torch_weights.h"

#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "io/state_check.h"
#include "loom/core/grad_mode.h"
#include "loom/io/model_file.h"
#include "loom/ops/creation.h"
#include "loom/ops/manipulation.h"

namespace loom::io {

namespace {

// A pattern split into literal text and placeholders.
struct Pattern {
  struct Piece {
    bool placeholder;
    std::string text;  // the literal, or the placeholder's name
  };
  std::vector<Piece> pieces;
  bool literal() const { return pieces.size() <= 1 && (pieces.empty() || !pieces[0].placeholder); }
};

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

Pattern parse(const std::string& s, const std::string& what) {
  Pattern p;
  std::string lit;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '{' && i + 1 < s.size() && ident_start(s[i + 1])) {
      size_t j = i + 1;
      while (j < s.size() && ident_char(s[j])) ++j;
      if (j < s.size() && s[j] == '}') {
        if (!p.pieces.empty() && p.pieces.back().placeholder && lit.empty())
          throw ValueError("TorchMap: the " + what + " pattern '" + s + "' has two placeholders in a row");
        if (!lit.empty()) p.pieces.push_back({false, std::move(lit)}), lit.clear();
        p.pieces.push_back({true, s.substr(i + 1, j - i - 1)});
        i = j + 1;
        continue;
      }
    }
    lit += s[i++];
  }
  if (!lit.empty()) p.pieces.push_back({false, std::move(lit)});
  return p;
}

using Bindings = std::vector<std::pair<std::string, std::string>>;

const std::string* bound(const Bindings& b, const std::string& name) {
  for (const auto& [k, v] : b)
    if (k == name) return &v;
  return nullptr;
}

// Anchored match of pieces[i..] against s[pos..]; placeholders take 1+ characters, shortest first.
bool match_from(const Pattern& p, size_t i, const std::string& s, size_t pos, Bindings& b) {
  if (i == p.pieces.size()) return pos == s.size();
  const Pattern::Piece& piece = p.pieces[i];
  if (!piece.placeholder) {
    if (s.compare(pos, piece.text.size(), piece.text) != 0) return false;
    return match_from(p, i + 1, s, pos + piece.text.size(), b);
  }
  if (const std::string* v = bound(b, piece.text)) {
    if (s.compare(pos, v->size(), *v) != 0) return false;
    return match_from(p, i + 1, s, pos + v->size(), b);
  }
  for (size_t len = 1; pos + len <= s.size(); ++len) {
    b.emplace_back(piece.text, s.substr(pos, len));
    if (match_from(p, i + 1, s, pos + len, b)) return true;
    b.pop_back();
  }
  return false;
}

bool matches(const Pattern& p, const std::string& s, Bindings* out = nullptr) {
  if (p.literal()) return p.pieces.empty() ? s.empty() : s == p.pieces[0].text;
  Bindings b;
  if (!match_from(p, 0, s, 0, b)) return false;
  if (out) *out = std::move(b);
  return true;
}

std::string substitute(const Pattern& p, const Bindings& b) {
  std::string s;
  for (const Pattern::Piece& piece : p.pieces) s += piece.placeholder ? *bound(b, piece.text) : piece.text;
  return s;
}

struct CompiledRule {
  const TorchRule* rule;
  Pattern torch;
  std::vector<Pattern> loom;  // the one Loom key, or the split's pieces in order
};

std::string rule_text(const TorchRule& r) {
  if (r.split.empty()) return "'" + r.torch + "' -> '" + r.loom + "'";
  std::string s = "'" + r.torch + "' -> split into";
  for (size_t i = 0; i < r.split.size(); ++i) s += (i ? ", '" : " '") + r.split[i] + "'";
  return s;
}

std::vector<CompiledRule> compile_rules(const TorchMap& map) {
  std::vector<CompiledRule> out;
  for (const TorchRule& r : map.rules) {
    CompiledRule c{&r, parse(r.torch, "PyTorch"), {}};
    if (r.split.empty()) {
      c.loom.push_back(parse(r.loom, "Loom"));
    } else {
      // one target or the other, so that a rule never says two things
      if (!r.loom.empty())
        throw ValueError("TorchMap: the rule " + rule_text(r) + " also names the Loom key '" + r.loom + "' (leave `loom` empty with `split`)");
      if (r.split.size() < 2) throw ValueError("TorchMap: the rule " + rule_text(r) + " splits into fewer than 2 pieces");
      if (r.split_axis < 0) throw ValueError("TorchMap: the rule " + rule_text(r) + " has split_axis " + std::to_string(r.split_axis) + " (valid: 0 or more)");
      for (const std::string& piece : r.split) c.loom.push_back(parse(piece, "Loom"));
    }
    for (const Pattern& l : c.loom)
      for (const Pattern::Piece& piece : l.pieces)
        if (piece.placeholder) {
          bool found = false;
          for (const Pattern::Piece& t : c.torch.pieces) found = found || (t.placeholder && t.text == piece.text);
          if (!found) throw ValueError("TorchMap: the rule " + rule_text(r) + " uses {" + piece.text + "} on the Loom side only");
        }
    out.push_back(std::move(c));
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& names, size_t most = 12) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > most) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

}  // namespace

TorchMap& TorchMap::append(const TorchMap& other) {
  rules.insert(rules.end(), other.rules.begin(), other.rules.end());
  ignore.insert(ignore.end(), other.ignore.begin(), other.ignore.end());
  keep.insert(keep.end(), other.keep.begin(), other.keep.end());
  return *this;
}

TorchMap torch_map_by_names(const Graph& graph) {
  TorchMap map;
  for (const nn::Layer& l : graph.nodes()) {
    const std::string kind = l.kind(), n = l.name();
    const nn::State& st = l.state();
    auto param = [&](const std::string& torch, const std::string& loom, TorchLayout layout = TorchLayout::Same) {
      if (st.has_param(loom)) map.rules.push_back({n + "." + torch, n + "/" + loom, layout});
    };
    if (kind == "Linear") {
      param("weight", "weights", TorchLayout::Transpose);
      param("bias", "bias");
    } else if (kind == "Conv1D" || kind == "Conv2D" || kind == "Conv2DTranspose" || kind == "Lookup") {
      param("weight", "weights");
      param("bias", "bias");
    } else if (kind == "BatchNorm" || kind == "LayerNorm") {
      param("weight", "weight");
      param("bias", "bias");
      if (kind == "BatchNorm") {
        for (const auto& [b, t] : st.buffers())
          if (b == "running_mean" || b == "running_var") map.rules.push_back({n + "." + b, n + "/" + b, TorchLayout::Same});
        map.ignore.push_back(n + ".num_batches_tracked");
      }
    } else if (kind == "Dropout") {
      for (const auto& [path, t] : st.all_buffers()) map.keep.push_back(n + "/" + path);
    }
  }
  return map;
}

TorchMap torchvision_map(const zoo::Network& network) {
  const std::string& n = network.name;
  for (const char* family : {"resnet", "vgg", "densenet"})
    if (n.rfind(family, 0) == 0) return torch_map_by_names(network.graph);
  throw ValueError("torchvision_map: the zoo model '" + n +
                   "' has no torchvision counterpart (resnet*, vgg*, densenet* do); write a TorchMap for it");
}

namespace {

// What a conversion has made so far: the tensors by Loom key, where each came from and how its
// shape was derived (for the graph's shape errors), and every problem, all named at the end.
struct Conversion {
  TensorMap out;
  std::vector<std::string> problems, unmapped;
  std::map<std::string, std::string> origin;      // Loom key -> the PyTorch key that filled it
  std::set<std::string> reported;                 // Loom keys with a problem named already
  std::map<std::string, std::string> shape_note;  // Loom key -> how its shape came from the PyTorch one
};

// The map's rules, compiled; exact rules found by key (the first of each), so that maps of a
// few hundred layers stay linear.
class RuleIndex {
 public:
  explicit RuleIndex(const TorchMap& map) : rules_(compile_rules(map)) {
    for (size_t i = 0; i < rules_.size(); ++i)
      if (rules_[i].torch.literal()) exact_.emplace(rules_[i].rule->torch, i);
  }
  // The first rule (in the map's order) that takes `key`, its pattern's bindings in `b`.
  const CompiledRule* find(const std::string& key, Bindings& b) const {
    auto e = exact_.find(key);
    for (size_t i = 0; i < rules_.size(); ++i) {
      if (e != exact_.end() && i == e->second) return &rules_[i];
      if (!rules_[i].torch.literal() && matches(rules_[i].torch, key, &b)) return &rules_[i];
    }
    return nullptr;
  }

 private:
  std::vector<CompiledRule> rules_;
  std::unordered_map<std::string, size_t> exact_;
};

// One PyTorch tensor into the Loom key(s) its rule names: as is, transposed, or split into
// equal pieces along the rule's axis.
void convert_tensor(Conversion& c, const std::string& key, const Tensor& value, const CompiledRule& rule, const Bindings& b) {
  const TorchRule& r = *rule.rule;
  std::vector<std::string> loom_keys;
  for (const Pattern& l : rule.loom) loom_keys.push_back(l.literal() ? (l.pieces.empty() ? "" : l.pieces[0].text) : substitute(l, b));
  bool taken = false;
  for (const std::string& loom_key : loom_keys)
    if (auto [it, fresh] = c.origin.emplace(loom_key, key); !fresh) {
      c.problems.push_back("'" + it->second + "' and '" + key + "' both map to '" + loom_key + "'");
      taken = true;
    }
  if (taken) return;
  auto refuse = [&](const std::string& why) {
    c.problems.push_back("'" + key + "' -> " + (loom_keys.size() == 1 ? "'" + loom_keys[0] + "'" : rule_text(r)) + " " + why);
    for (const std::string& k : loom_keys) c.reported.insert(k);
  };
  Tensor t = value;
  if (r.layout == TorchLayout::Transpose) {
    if (!t.defined() || t.ndim() != 2)
      return refuse("is to be transposed but has shape " + (t.defined() ? shape_str(t.shape()) : std::string("(undefined)")) +
                    ", not a matrix");
    t = t.transpose();
  }
  const std::string from_shape = value.defined() ? shape_str(value.shape()) : std::string("(undefined)");
  if (loom_keys.size() == 1) {
    if (r.layout == TorchLayout::Transpose) c.shape_note[loom_keys[0]] = " (transposed from " + from_shape + ")";
    c.out.emplace(loom_keys[0], t);
    return;
  }
  const int64_t parts = static_cast<int64_t>(loom_keys.size());
  if (!t.defined() || r.split_axis >= t.ndim() || t.dim(r.split_axis) % parts != 0)
    return refuse("has shape " + (t.defined() ? shape_str(t.shape()) : std::string("(undefined)")) + ", which does not split into " +
                  std::to_string(parts) + " equal pieces along axis " + std::to_string(r.split_axis));
  const std::vector<Tensor> pieces = loom::split(t, parts, r.split_axis);
  for (int64_t j = 0; j < parts; ++j) {
    c.out.emplace(loom_keys[j], pieces[j]);
    c.shape_note[loom_keys[j]] = " (piece " + std::to_string(j + 1) + " of " + std::to_string(parts) + " of " + from_shape +
                                 (r.layout == TorchLayout::Transpose ? " transposed" : "") + ")";
  }
}

// Kept tensors: the graph's own values (copies) for keep patterns no rule filled.
void keep_graph_values(const Graph& graph, const std::vector<Pattern>& keep, TensorMap& out) {
  if (keep.empty()) return;
  for (const auto& [k, t] : graph_state(graph))
    if (!out.count(k))
      for (const Pattern& p : keep)
        if (matches(p, k)) {
          NoGrad off;
          Tensor copy = empty_like(t);
          copy.copy_(t);
          out.emplace(k, copy);
          break;
        }
}

// The graph's checks (those of load_graph_state), worded for the PyTorch side: each Loom key
// named with the PyTorch key it came from.
void check_against_graph(const Graph& graph, Conversion& c) {
  const detail::StateCheck check = detail::check_state(graph, c.out);
  auto from = [&](const std::string& loom_key) {
    auto it = c.origin.find(loom_key);
    return it == c.origin.end() ? "'" + loom_key + "' (kept)" : "'" + it->second + "' -> '" + loom_key + "'";
  };
  for (const detail::StateIssue& i : check.issues) {
    if (i.kind == detail::StateIssue::Kind::Doubly) {
      std::vector<std::string> froms;
      for (const std::string& k : i.keys) froms.push_back(from(k));
      std::string s;
      for (size_t j = 0; j < froms.size(); ++j) s += (j ? " and " : "") + froms[j];
      c.problems.push_back(s + " fill one shared tensor: map it once");
    } else {
      std::string what = from(i.keys[0]) + " " + i.detail;
      if (i.kind == detail::StateIssue::Kind::Shape)
        if (auto n = c.shape_note.find(i.keys[0]); n != c.shape_note.end()) what += n->second;
      c.problems.push_back(what);
    }
  }
  std::vector<std::string> missing;
  for (const std::string& k : check.missing)
    if (!c.reported.count(k)) missing.push_back(k);
  if (!missing.empty()) c.problems.push_back("no PyTorch key fills the graph's " + quoted_list(missing));
  if (!check.unexpected.empty()) {
    std::vector<std::string> froms;
    for (const std::string& k : check.unexpected) froms.push_back(from(k));
    std::string s;
    for (size_t j = 0; j < froms.size() && j < 12; ++j) s += (j ? ", " : "") + froms[j];
    if (froms.size() > 12) s += ", ... (" + std::to_string(froms.size()) + " in all)";
    c.problems.push_back(s + ": the graph has no such tensor");
  }
}

}  // namespace

TensorMap convert_torch_state(const Graph& graph, const TensorMap& state_dict, const TorchMap& map, const std::string& source) {
  const RuleIndex rules(map);
  std::vector<Pattern> ignore, keep;
  for (const std::string& s : map.ignore) ignore.push_back(parse(s, "ignore"));
  for (const std::string& s : map.keep) keep.push_back(parse(s, "keep"));
  Conversion c;
  for (const auto& [key, value] : state_dict) {
    bool ignored = false;
    for (const Pattern& p : ignore) ignored = ignored || matches(p, key);
    if (ignored) continue;
    Bindings b;
    if (const CompiledRule* rule = rules.find(key, b)) convert_tensor(c, key, value, *rule, b);
    else c.unmapped.push_back(key);
  }
  if (!c.unmapped.empty())
    c.problems.push_back("no rule maps the PyTorch keys " + quoted_list(c.unmapped) + " (add rules, or ignore them)");
  keep_graph_values(graph, keep, c.out);
  check_against_graph(graph, c);
  if (!c.problems.empty()) {
    std::string msg = "load_torch_state: " + source + " does not fit the graph (" + std::to_string(c.problems.size()) +
                      (c.problems.size() == 1 ? " problem" : " problems") + "):";
    for (const std::string& p : c.problems) msg += "\n  - " + p;
    throw ValueError(msg);
  }
  return std::move(c.out);
}

TensorMap torch_state_from_graph(const Graph& graph, const TorchMap& map) {
  // every name of every tensor (graph_state lists a shared tensor once; a map may name either)
  std::unordered_map<std::string, Tensor> tensors;
  for (const nn::Layer& l : graph.nodes()) {
    for (const auto& [path, t] : l.state().all_params()) tensors.emplace(l.name() + "/" + path, t);
    for (const auto& [path, t] : l.state().all_buffers()) tensors.emplace(l.name() + "/" + path, t);
  }
  TensorMap out;
  for (const CompiledRule& c : compile_rules(map)) {
    const TorchRule& r = *c.rule;
    bool exact = c.torch.literal();
    for (const Pattern& l : c.loom) exact = exact && l.literal();
    if (!exact) throw ValueError("torch_state_from_graph: the rule " + rule_text(r) + " has placeholders (valid: exact keys only)");
    std::vector<Tensor> pieces;
    for (const Pattern& l : c.loom) {
      const std::string k = l.pieces.empty() ? "" : l.pieces[0].text;
      auto it = tensors.find(k);
      if (it == tensors.end()) throw ValueError("torch_state_from_graph: the rule " + rule_text(r) + " names '" + k + "', which the graph does not have");
      pieces.push_back(it->second.detach());
    }
    Tensor t = pieces.size() == 1 ? pieces[0] : concatenate(pieces, r.split_axis);
    if (r.layout == TorchLayout::Transpose) t = t.transpose();
    out[r.torch] = t.contiguous();
  }
  return out;
}

void load_torch_state(const Graph& graph, const TensorMap& state_dict, const TorchMap& map, const std::string& source) {
  const TensorMap converted = convert_torch_state(graph, state_dict, map, source);
  load_graph_state(graph, converted, source);  // checked above: cannot fail, copies everything
}

void load_torch_weights(const std::string& path, const Graph& graph, const TorchMap& map) {
  const TensorMap state_dict = load_safetensors(path);
  load_torch_state(graph, state_dict, map, "'" + path + "'");
}

}  // namespace loom::io
