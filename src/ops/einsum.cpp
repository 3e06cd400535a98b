// einsum: parsed subscripts, then diagonals (repeated labels), early sums (labels no one else
// needs) and pairwise contractions through matmul, all differentiable ops. With three or more
// operands the pair contracted next is the one whose result is smallest (greedy, as
// opt_einsum's "greedy" path), so that a chain like "ij,jk,kl->il" never builds a large
// intermediate when a small one exists.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"
#include "ops/registry_parts.h"

namespace loom {

namespace {

// Labels: 'A'..'Z' = 0..25, 'a'..'z' = 26..51 (so sorting them sorts the letters as
// NumPy's implicit output does); the axes of "..." are 52 + j, j counted over the broadcast
// axes of all operands (right-aligned).
constexpr int kEllipsisBase = 52;
using Labels = std::vector<int>;

struct Operand {
  Tensor t;
  Labels labels;  // one per axis of t
};

std::string label_name(int l) {
  if (l < 26) return std::string(1, static_cast<char>('A' + l));
  if (l < kEllipsisBase) return std::string(1, static_cast<char>('a' + l - 26));
  return "...[" + std::to_string(l - kEllipsisBase) + "]";
}

[[noreturn]] void fail(const std::string& subscripts, const std::string& what) {
  throw ValueError("einsum: " + what + " in subscripts \"" + subscripts + "\"");
}

struct Term {
  Labels letters_before, letters_after;  // around "..."
  bool ellipsis = false;
};

Term parse_term(const std::string& subs, const std::string& s, const std::string& where) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.') {
      if (s.compare(i, 3, "...") != 0) fail(subs, where + ": a '.' that is not part of \"...\"");
      if (t.ellipsis) fail(subs, where + ": \"...\" twice");
      t.ellipsis = true;
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      const int l = c >= 'a' ? 26 + (c - 'a') : c - 'A';
      (t.ellipsis ? t.letters_after : t.letters_before).push_back(l);
    } else {
      fail(subs, where + ": invalid character '" + std::string(1, c) + "' (labels are letters a-z, A-Z, and \"...\")");
    }
  }
  return t;
}

// Sums the axes whose labels are not in `keep`.
Operand sum_unneeded(Operand o, const std::vector<bool>& keep) {
  Axes ax;
  Labels rest;
  for (size_t i = 0; i < o.labels.size(); ++i) {
    if (keep[o.labels[i]]) rest.push_back(o.labels[i]);
    else ax.push_back(static_cast<int64_t>(i));
  }
  if (ax.empty()) return o;
  return {sum(o.t, ax), rest};
}

// Takes the diagonal of every label repeated within one operand.
Operand diagonals(Operand o, const std::string& subs) {
  for (;;) {
    int64_t p = -1, q = -1;
    for (size_t i = 0; i < o.labels.size() && p < 0; ++i)
      for (size_t j = i + 1; j < o.labels.size(); ++j)
        if (o.labels[i] == o.labels[j]) {
          p = static_cast<int64_t>(i);
          q = static_cast<int64_t>(j);
          break;
        }
    if (p < 0) return o;
    const int64_t n = o.t.shape()[p];
    if (o.t.shape()[q] != n)
      fail(subs, "label " + label_name(o.labels[p]) + " is repeated in one operand over axes of sizes " +
                     std::to_string(n) + " and " + std::to_string(o.t.shape()[q]) + " (a diagonal needs equal sizes)");
    // move p, q last, keep the diagonal: sum(x * eye) over the last axis
    Tensor x = moveaxis(moveaxis(o.t, q, -1), p, -2);
    x = sum(multiply(x, eye(n, std::nullopt, 0, is_floating(x.dtype()) ? x.dtype() : Int64, x.device())), {-1});
    const int l = o.labels[p];
    o.labels.erase(o.labels.begin() + q);
    o.labels.erase(o.labels.begin() + p);
    o.labels.push_back(l);
    o.t = x;
  }
}

// Contracts two operands; `keep`: labels needed after this contraction.
Operand contract(Operand a, Operand b, const std::vector<bool>& keep) {
  std::vector<bool> in_a(kEllipsisBase + 64, false), in_b(kEllipsisBase + 64, false);
  std::vector<bool> keep_ab = keep;
  for (int l : a.labels) in_a[l] = true;
  for (int l : b.labels) in_b[l] = true;
  for (size_t l = 0; l < keep_ab.size(); ++l)
    keep_ab[l] = keep[l] || (in_a[l] && in_b[l]);  // shared labels survive to the product
  a = sum_unneeded(a, keep_ab);
  b = sum_unneeded(b, keep_ab);
  Labels batch, con, free_a, free_b;
  for (int l : a.labels) {
    if (in_b[l]) (keep[l] ? batch : con).push_back(l);
    else free_a.push_back(l);
  }
  for (int l : b.labels)
    if (!in_a[l]) free_b.push_back(l);
  auto size_of = [](const Operand& o, int l) {
    for (size_t i = 0; i < o.labels.size(); ++i)
      if (o.labels[i] == l) return o.t.shape()[i];
    return int64_t(1);
  };
  auto arrange = [&](const Operand& o, const std::vector<const Labels*>& groups) {
    Axes perm;
    Shape full;
    for (const Labels* g : groups)
      for (int l : *g) {
        perm.push_back(std::find(o.labels.begin(), o.labels.end(), l) - o.labels.begin());
        full.push_back(std::max(size_of(a, l), size_of(b, l)));  // a size-1 axis broadcasts
      }
    return broadcast_to(permute(o.t, perm), full);
  };
  auto prod = [&](const Labels& ls) {
    int64_t p = 1;
    for (int l : ls) p *= std::max(size_of(a, l), size_of(b, l));
    return p;
  };
  const int64_t B = prod(batch), M = prod(free_a), K = prod(con), N = prod(free_b);
  Tensor ta = reshape(arrange(a, {&batch, &free_a, &con}), {B, M, K});
  Tensor tb = reshape(arrange(b, {&batch, &con, &free_b}), {B, K, N});
  Shape out;
  Labels labels;
  for (const Labels* g : {&batch, &free_a, &free_b})
    for (int l : *g) {
      out.push_back(std::max(size_of(a, l), size_of(b, l)));
      labels.push_back(l);
    }
  return {reshape(matmul(ta, tb), out), labels};
}

// The subscripts without spaces, split at "->" into the operands' terms and the output's.
struct Subscripts {
  std::vector<std::string> terms;
  std::optional<std::string> output;  // none: implicit
};

Subscripts split_subscripts(const std::string& subscripts) {
  std::string subs;
  for (char c : subscripts)
    if (c != ' ') subs += c;
  const size_t arrow = subs.find("->");
  const std::string lhs = subs.substr(0, arrow);
  Subscripts r;
  for (size_t s = 0;;) {
    const size_t c = lhs.find(',', s);
    r.terms.push_back(lhs.substr(s, c == std::string::npos ? std::string::npos : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  if (arrow != std::string::npos) r.output = subs.substr(arrow + 2);
  return r;
}

// Each operand's term parsed and held to its number of axes; `ell` becomes the number of axes
// "..." stands for (the most any operand gives it).
std::vector<Term> parse_operand_terms(const std::string& subscripts, const std::vector<std::string>& terms,
                                      const std::vector<Tensor>& operands, int64_t& ell) {
  if (terms.size() != operands.size())
    fail(subscripts, std::to_string(terms.size()) + " operand term(s) for " + std::to_string(operands.size()) +
                         " operand(s) (give one comma-separated term per tensor)");
  std::vector<Term> parsed;
  ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    parsed.push_back(parse_term(subscripts, terms[i], "operand " + std::to_string(i)));
    const Term& t = parsed.back();
    const int64_t named = static_cast<int64_t>(t.letters_before.size() + t.letters_after.size());
    const int64_t nd = operands[i].ndim();
    if (t.ellipsis ? named > nd : named != nd)
      fail(subscripts, "operand " + std::to_string(i) + " has " + std::to_string(nd) + " dimension(s) (shape " +
                           shape_str(operands[i].shape()) + ") but its term \"" + terms[i] + "\" names " +
                           std::to_string(named));
    if (t.ellipsis) ell = std::max(ell, nd - named);
  }
  if (ell > 64) fail(subscripts, "more than 64 axes under \"...\"");
  return parsed;
}

// What the operands say of each label: in how many operands it is, how often it is written,
// and its size (a size-1 axis broadcasts to the others').
struct LabelStats {
  std::vector<int> count = std::vector<int>(kEllipsisBase + 64, 0), occurrences = std::vector<int>(kEllipsisBase + 64, 0);
  std::map<int, int64_t> size;
};

// The operands with one label per axis ("..." expanded, right-aligned), their sizes checked.
std::vector<Operand> label_operands(const std::string& subscripts, const std::vector<Term>& parsed,
                                    const std::vector<Tensor>& operands, int64_t ell, LabelStats& stats) {
  std::vector<Operand> ops;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Term& t = parsed[i];
    Labels ls = t.letters_before;
    if (t.ellipsis) {
      const int64_t e = operands[i].ndim() - static_cast<int64_t>(t.letters_before.size() + t.letters_after.size());
      for (int64_t j = 0; j < e; ++j) ls.push_back(kEllipsisBase + static_cast<int>(ell - e + j));
    }
    ls.insert(ls.end(), t.letters_after.begin(), t.letters_after.end());
    std::vector<bool> seen(stats.count.size(), false);
    for (size_t k = 0; k < ls.size(); ++k) {
      if (!seen[ls[k]]) ++stats.count[ls[k]];
      ++stats.occurrences[ls[k]];
      seen[ls[k]] = true;
      const int64_t n = operands[i].shape()[k];
      auto it = stats.size.find(ls[k]);
      if (it == stats.size.end() || it->second == 1) stats.size[ls[k]] = n;
      else if (n != 1 && n != it->second)
        fail(subscripts, "label " + label_name(ls[k]) + " has sizes " + std::to_string(it->second) + " and " +
                             std::to_string(n) + " (sizes of one label must match, or be 1 to broadcast)");
    }
    ops.push_back({operands[i], ls});
  }
  return ops;
}

// The output's labels: as written after "->" (each in some operand, none twice), else NumPy's
// implicit output: "..." first, then the labels written exactly once, sorted.
Labels output_labels(const std::string& subscripts, const std::optional<std::string>& output, int64_t ell, const LabelStats& stats) {
  Labels out;
  if (!output) {
    for (int64_t j = 0; j < ell; ++j) out.push_back(kEllipsisBase + static_cast<int>(j));
    for (int l = 0; l < kEllipsisBase; ++l)
      if (stats.occurrences[l] == 1) out.push_back(l);
    return out;
  }
  const Term t = parse_term(subscripts, *output, "the output");
  out = t.letters_before;
  if (t.ellipsis)
    for (int64_t j = 0; j < ell; ++j) out.push_back(kEllipsisBase + static_cast<int>(j));
  out.insert(out.end(), t.letters_after.begin(), t.letters_after.end());
  std::vector<bool> seen(stats.count.size(), false);
  for (int l : out) {
    if (l < kEllipsisBase && stats.count[l] == 0) fail(subscripts, "output label " + label_name(l) + " is in no operand");
    if (seen[l]) fail(subscripts, "output label " + label_name(l) + " is repeated");
    seen[l] = true;
  }
  return out;
}

// The labels of the output and of the operands other than those in `skip`: what must survive
// a step that consumes the skipped ones.
std::vector<bool> needed_labels(const std::vector<Operand>& ops, const std::vector<bool>& in_out, const std::vector<size_t>& skip) {
  std::vector<bool> k = in_out;
  for (size_t j = 0; j < ops.size(); ++j)
    if (std::find(skip.begin(), skip.end(), j) == skip.end())
      for (int l : ops[j].labels) k[l] = true;
  return k;
}

// Greedy: the pair whose result is smallest (then the first such pair).
std::pair<size_t, size_t> cheapest_pair(const std::vector<Operand>& ops, const std::vector<bool>& in_out, const LabelStats& stats) {
  size_t bi = 0, bj = 1;
  double best = -1;
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t j = i + 1; j < ops.size(); ++j) {
      const std::vector<bool> k = needed_labels(ops, in_out, {i, j});
      std::vector<bool> counted(stats.count.size(), false);
      double cost = 1;
      for (const Operand* o : {&ops[i], &ops[j]})
        for (int l : o->labels)
          if (k[l] && !counted[l]) {
            counted[l] = true;
            cost *= static_cast<double>(stats.size.at(l));
          }
      if (best < 0 || cost < best) {
        best = cost;
        bi = i;
        bj = j;
      }
    }
  return {bi, bj};
}

// Diagonals and early sums per operand, then pairwise contractions down to one operand.
Operand contract_all(std::vector<Operand> ops, const std::vector<bool>& in_out, const LabelStats& stats, const std::string& subscripts) {
  for (auto& o : ops) o = diagonals(std::move(o), subscripts);
  for (size_t i = 0; i < ops.size(); ++i) ops[i] = sum_unneeded(ops[i], needed_labels(ops, in_out, {i}));
  while (ops.size() > 1) {
    const auto [bi, bj] = cheapest_pair(ops, in_out, stats);
    Operand c = contract(ops[bi], ops[bj], needed_labels(ops, in_out, {bi, bj}));
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(bj));
    ops[bi] = std::move(c);
  }
  return sum_unneeded(ops[0], in_out);
}

// The last operand's axes in the output's order, at the output's sizes: a label broadcast from
// size 1 in the only operand that carries it keeps the full size.
Tensor arrange_output(const Operand& r, const Labels& out, const LabelStats& stats) {
  Axes perm;
  for (int l : out) perm.push_back(std::find(r.labels.begin(), r.labels.end(), l) - r.labels.begin());
  Tensor y = permute(r.t, perm);
  Shape full;
  for (int l : out) full.push_back(stats.size.at(l));
  return y.shape() == full ? y : broadcast_to(y, full);
}

}  // namespace

Tensor einsum(const std::string& subscripts, const std::vector<Tensor>& operands) {
  const Subscripts split = split_subscripts(subscripts);
  if (operands.empty()) throw ValueError("einsum: no operands (give at least one tensor)");
  for (const Tensor& t : operands) detail::check_defined(t, "einsum");
  int64_t ell = 0;
  const std::vector<Term> parsed = parse_operand_terms(subscripts, split.terms, operands, ell);
  LabelStats stats;
  std::vector<Operand> ops = label_operands(subscripts, parsed, operands, ell, stats);
  const Labels out = output_labels(subscripts, split.output, ell, stats);
  std::vector<bool> in_out(stats.count.size(), false);
  for (int l : out) in_out[l] = true;
  return arrange_output(contract_all(std::move(ops), in_out, stats, subscripts), out, stats);
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> einsum_ops() {
  return {
      {"einsum", "linalg", true},
  };
}

}  // namespace loom::detail
