#include "loom/train/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "loom/core/error.h"
#include "loom/ops/elementwise.h"

namespace loom::train {

namespace {

void check(const SamplingOptions& o) {
  const auto bad = [](const std::string& what) { throw ValueError("sample_token: " + what); };
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) bad("temperature " + std::to_string(o.temperature) + " (valid: 0 for greedy, or > 0)");
  if (o.top_k < 0) bad("top_k " + std::to_string(o.top_k) + " (valid: 0 for all, or >= 1)");
  if (!(o.top_p > 0 && o.top_p <= 1)) bad("top_p " + std::to_string(o.top_p) + " (valid: in (0, 1])");
  if (!(o.min_p >= 0 && o.min_p <= 1)) bad("min_p " + std::to_string(o.min_p) + " (valid: in [0, 1])");
  if (!(o.repetition_penalty > 0) || !std::isfinite(o.repetition_penalty))
    bad("repetition_penalty " + std::to_string(o.repetition_penalty) + " (valid: > 0; 1 for none)");
}

// A uniform double in [0, 1) from one draw of the generator: its 53 high bits.
double uniform01(Generator& g) { return static_cast<double>(g.next_key() >> 11) * 0x1.0p-53; }

}  // namespace

int64_t sample_token(const Tensor& logits, const SamplingOptions& o, const std::vector<int64_t>& history, Generator& generator) {
  check(o);
  if (!logits.defined() || logits.ndim() != 1 || logits.numel() < 1 || !is_floating(logits.dtype()))
    throw ValueError("sample_token: logits must be a 1-d floating tensor (vocab,) of at least one value, got " +
                     (logits.defined() ? shape_str(logits.shape()) + " " + dtype_name(logits.dtype()) : std::string("an undefined tensor")));
  const int64_t n = logits.numel();
  std::vector<double> z = logits.astype(Float64).contiguous().to_vector<double>();
  if (o.repetition_penalty != 1) {
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t id : history)
      if (id >= 0 && id < n && !seen[id]) {
        seen[id] = true;
        z[id] = z[id] > 0 ? z[id] / o.repetition_penalty : z[id] * o.repetition_penalty;
      }
  }
  if (o.temperature == 0) return std::max_element(z.begin(), z.end()) - z.begin();  // the first of equal maxima

  // candidates by decreasing logit (ties: lower id first), with their probabilities
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, n) : n;
  const auto by_logit = [&](int64_t a, int64_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_logit);
  const double top = z[order[0]] / o.temperature;
  if (!std::isfinite(top)) throw ValueError("sample_token: the largest logit is not finite (" + std::to_string(z[order[0]]) + ")");
  std::vector<double> p(static_cast<size_t>(keep));
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[i] = std::exp(z[order[i]] / o.temperature - top);
  for (double& v : p) v /= total;
  if (o.top_p < 1) {  // the smallest prefix reaching top_p (at least one token)
    double c = 0;
    int64_t i = 0;
    while (i < keep && (i == 0 || c < o.top_p)) c += p[i++];
    keep = i;
  }
  if (o.min_p > 0) {  // at least min_p times the most probable token's probability
    const double floor = o.min_p * p[0];
    int64_t i = 1;
    while (i < keep && p[i] >= floor) ++i;
    keep = i;
  }
  total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[i];
  const double u = uniform01(generator) * total;
  double c = 0;
  for (int64_t i = 0; i < keep; ++i) {
    c += p[i];
    if (u < c) return order[i];
  }
  return order[keep - 1];  // rounding at the end of the sum
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  // the length of a character from its first byte; 0 for a byte that starts none
  const auto length = [](unsigned char b) -> size_t { return b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0; };
  size_t i = 0, cut = 0;
  while (i < pending_.size()) {
    const size_t len = length(static_cast<unsigned char>(pending_[i]));
    if (len == 0) {  // a stray byte: passed through
      cut = ++i;
      continue;
    }
    size_t k = 1;
    while (k < len && i + k < pending_.size() && (static_cast<unsigned char>(pending_[i + k]) & 0xC0) == 0x80) ++k;
    if (k == len) {
      cut = i += len;
    } else if (i + k == pending_.size()) {
      break;  // a character whose last bytes have not come yet
    } else {
      cut = i += k;  // a broken character: its bytes as they are
    }
  }
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace loom::train
