#include "loom/flow/search_space.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/utf8.h"
#include "loom/core/error.h"

namespace loom::flow {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Uniform in [0, 1) from 53 bits: the same on every platform (std::uniform_real_distribution's
// algorithm is the library's own).
double unit(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

// An integer of [0, bound) without modulo bias.
uint64_t below(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % bound);
  for (;;)
    if (const uint64_t x = gen(); x < limit) return x % bound;
}

double standard_normal(std::mt19937_64& gen) {  // Box-Muller
  const double u = 1.0 - unit(gen);                 // in (0, 1]
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * kPi * unit(gen));
}

std::string describe(const Param& p) { return "parameter '" + p.name + "'"; }

// A numeric parameter's model space: log for LogUniform, [low - 0.5, high + 0.5] for Int (its
// values rounded back), the bounds for Uniform.
struct Range {
  double low, high;
};
Range model_range(const Param& p) {
  switch (p.kind) {
    case ParamKind::LogUniform: return {std::log(p.low), std::log(p.high)};
    case ParamKind::Int: return {p.low - 0.5, p.high + 0.5};
    default: return {p.low, p.high};
  }
}
double to_model(const Param& p, double v) { return p.kind == ParamKind::LogUniform ? std::log(v) : v; }
double from_model(const Param& p, double m) {
  switch (p.kind) {
    case ParamKind::LogUniform: return std::clamp(std::exp(m), p.low, p.high);
    case ParamKind::Int: return std::clamp(std::round(m), p.low, p.high);
    default: return std::clamp(m, p.low, p.high);
  }
}

double sample_param(const Param& p, std::mt19937_64& gen) {
  switch (p.kind) {
    case ParamKind::Uniform: return p.low + (p.high - p.low) * unit(gen);
    case ParamKind::LogUniform: return from_model(p, std::log(p.low) + (std::log(p.high) - std::log(p.low)) * unit(gen));
    case ParamKind::Int: return p.low + static_cast<double>(below(gen, static_cast<uint64_t>(p.high - p.low) + 1));
    case ParamKind::Categorical: return static_cast<double>(below(gen, p.choices.size()));
  }
  return 0;
}

}  // namespace

// --- the space

void SearchSpace::add(Param p) {
  if (p.name.empty() || p.name.size() > 128)
    throw ValueError("SearchSpace: parameter name '" + p.name + "' (valid: 1 to 128 bytes)");
  for (const Param& q : params_)
    if (q.name == p.name) throw ValueError("SearchSpace: parameter '" + p.name + "' is already declared");
  if (p.kind != ParamKind::Categorical) {
    if (!std::isfinite(p.low) || !std::isfinite(p.high) || p.low > p.high)
      throw ValueError("SearchSpace: " + describe(p) + " has bounds [" + std::to_string(p.low) + ", " + std::to_string(p.high) +
                       "] (valid: finite, low <= high)");
    if (p.kind == ParamKind::LogUniform && p.low <= 0)
      throw ValueError("SearchSpace: log-uniform " + describe(p) + " has low " + std::to_string(p.low) + " (valid: > 0)");
  } else {
    if (p.choices.empty()) throw ValueError("SearchSpace: categorical " + describe(p) + " has no choices (valid: one or more)");
    for (std::string& c : p.choices) {
      const nlohmann::json j = nlohmann::json::parse(c, nullptr, false);
      if (j.is_discarded())
        throw ValueError("SearchSpace: choice " + loom::detail::quote_text(c) + " of " + describe(p) +
                         " is not a JSON value (a string is written with its quotes: \"\\\"relu\\\"\")");
      c = j.dump();
    }
  }
  params_.push_back(std::move(p));
}

SearchSpace& SearchSpace::uniform(const std::string& name, double low, double high) {
  add({name, ParamKind::Uniform, low, high, {}});
  return *this;
}
SearchSpace& SearchSpace::log_uniform(const std::string& name, double low, double high) {
  add({name, ParamKind::LogUniform, low, high, {}});
  return *this;
}
SearchSpace& SearchSpace::integer(const std::string& name, int64_t low, int64_t high) {
  add({name, ParamKind::Int, static_cast<double>(low), static_cast<double>(high), {}});
  return *this;
}
SearchSpace& SearchSpace::categorical(const std::string& name, const std::vector<std::string>& choices) {
  add({name, ParamKind::Categorical, 0, 0, choices});
  return *this;
}

void SearchSpace::check(const Point& x) const {
  if (x.size() != params_.size())
    throw ValueError("SearchSpace: a point of " + std::to_string(x.size()) + " values for " + std::to_string(params_.size()) +
                     " parameters");
  for (size_t i = 0; i < x.size(); ++i) {
    const Param& p = params_[i];
    const bool ok = p.kind == ParamKind::Categorical
                        ? x[i] >= 0 && x[i] < static_cast<double>(p.choices.size()) && x[i] == std::floor(x[i])
                        : x[i] >= p.low && x[i] <= p.high && (p.kind != ParamKind::Int || x[i] == std::floor(x[i]));
    if (!ok) throw ValueError("SearchSpace: value " + std::to_string(x[i]) + " is outside " + describe(p));
  }
}

std::string SearchSpace::to_json(const Point& x) const {
  check(x);
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < x.size(); ++i) {
    const Param& p = params_[i];
    if (p.kind == ParamKind::Categorical)
      j[p.name] = nlohmann::json::parse(p.choices[static_cast<size_t>(x[i])]);
    else if (p.kind == ParamKind::Int)
      j[p.name] = static_cast<int64_t>(x[i]);
    else
      j[p.name] = x[i];
  }
  return j.dump();
}

// --- grid

GridSampler::GridSampler(int64_t points_per_axis) : points_per_axis_(points_per_axis) {
  if (points_per_axis < 2)
    throw ValueError("GridSampler: points_per_axis " + std::to_string(points_per_axis) + " (valid: 2 or more)");
}

std::vector<double> GridSampler::axis(const Param& p) const {
  std::vector<double> out;
  const int64_t n = points_per_axis_;
  switch (p.kind) {
    case ParamKind::Categorical:
      for (size_t i = 0; i < p.choices.size(); ++i) out.push_back(static_cast<double>(i));
      return out;
    case ParamKind::Int:
      if (p.high - p.low + 1 <= static_cast<double>(n)) {
        for (double v = p.low; v <= p.high; ++v) out.push_back(v);
        return out;
      }
      for (int64_t i = 0; i < n; ++i) {
        const double v = std::round(p.low + (p.high - p.low) * static_cast<double>(i) / static_cast<double>(n - 1));
        if (out.empty() || out.back() != v) out.push_back(v);
      }
      return out;
    default: {
      if (p.low == p.high) return {p.low};
      const Range r = model_range(p);
      for (int64_t i = 0; i < n; ++i)
        out.push_back(from_model(p, r.low + (r.high - r.low) * static_cast<double>(i) / static_cast<double>(n - 1)));
      out.front() = p.low;  // exactly the bounds, whatever exp(log(x)) rounds to
      out.back() = p.high;
      return out;
    }
  }
}

int64_t GridSampler::size(const SearchSpace& space) const {
  int64_t n = 1;
  for (const Param& p : space.params()) n *= static_cast<int64_t>(axis(p).size());
  return n;
}

std::optional<Point> GridSampler::next(const SearchSpace& space, const std::vector<Observation>&) {
  if (next_ >= size(space)) return std::nullopt;
  Point x(space.size());
  int64_t rest = next_++;
  for (size_t i = space.size(); i-- > 0;) {  // the last parameter varies fastest
    const std::vector<double> values = axis(space.params()[i]);
    x[i] = values[static_cast<size_t>(rest % static_cast<int64_t>(values.size()))];
    rest /= static_cast<int64_t>(values.size());
  }
  return x;
}

// --- random

std::optional<Point> RandomSampler::next(const SearchSpace& space, const std::vector<Observation>&) {
  Point x;
  for (const Param& p : space.params()) x.push_back(sample_param(p, gen_));
  return x;
}

// --- TPE

namespace {

// A mixture of Gaussians truncated to [low, high] (a numeric parameter's Parzen estimator).
struct Parzen {
  Range range;
  std::vector<double> weights, mus, sigmas;

  double log_pdf(double x) const {
    double total = 0;
    for (size_t i = 0; i < mus.size(); ++i) {
      const double s = sigmas[i];
      const double mass = 0.5 * (std::erf((range.high - mus[i]) / (s * std::sqrt(2.0))) -
                                 std::erf((range.low - mus[i]) / (s * std::sqrt(2.0))));
      const double z = (x - mus[i]) / s;
      total += weights[i] * std::exp(-0.5 * z * z) / (s * std::sqrt(2.0 * kPi) * std::max(mass, 1e-300));
    }
    return std::log(std::max(total, 1e-300));
  }

  double sample(std::mt19937_64& gen) const {
    double u = unit(gen), acc = 0;
    size_t k = 0;
    for (; k + 1 < weights.size(); ++k)
      if ((acc += weights[k]) > u) break;
    for (int tries = 0; tries < 100; ++tries)  // the truncation by rejection
      if (const double x = mus[k] + sigmas[k] * standard_normal(gen); x >= range.low && x <= range.high) return x;
    return std::clamp(mus[k], range.low, range.high);
  }
};

// Optuna's weights of n observations in trial order: equal up to 25, then a ramp from 1/n for
// the oldest to 1 for the 25 most recent.
std::vector<double> trial_weights(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n <= 25) return w;
  const size_t ramp = n - 25;
  for (size_t i = 0; i < ramp; ++i)
    w[i] = ramp == 1 ? 1.0 / static_cast<double>(n)
                     : 1.0 / static_cast<double>(n) + (1.0 - 1.0 / static_cast<double>(n)) * static_cast<double>(i) / static_cast<double>(ramp - 1);
  return w;
}

// The Parzen estimator of observations `xs` (in model space, trial order) of a numeric
// parameter: a kernel at each, plus the prior (centre of the range, width of the range);
// each kernel's width the larger distance to its neighbours (the bounds at the ends), clipped
// to [range / min(100, 1 + n), range] (Optuna's "magic clip").
Parzen parzen(const Range& r, const std::vector<double>& xs, double prior_weight) {
  Parzen pz{r, {}, {}, {}};
  const double width = r.high - r.low;
  std::vector<double> w = trial_weights(xs.size());
  std::vector<double> mus = xs;
  const double prior_mu = 0.5 * (r.low + r.high);
  mus.push_back(prior_mu);
  w.push_back(prior_weight);
  std::vector<size_t> order(mus.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&mus](size_t a, size_t b) { return mus[a] < mus[b]; });
  std::vector<double> sigmas(mus.size());
  for (size_t j = 0; j < order.size(); ++j) {
    const double left = j == 0 ? r.low : mus[order[j - 1]];
    const double right = j + 1 == order.size() ? r.high : mus[order[j + 1]];
    sigmas[order[j]] = std::max(mus[order[j]] - left, right - mus[order[j]]);
  }
  const double min_sigma = width / std::min(100.0, 1.0 + static_cast<double>(mus.size()));
  for (double& s : sigmas) s = std::clamp(s, min_sigma, width);
  sigmas.back() = width;  // the prior's
  if (width <= 0)
    for (double& s : sigmas) s = 1.0;  // a one-point range: any kernel will do
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= total;
  pz.weights = std::move(w);
  pz.mus = std::move(mus);
  pz.sigmas = std::move(sigmas);
  return pz;
}

// A categorical parameter's estimator: each choice's probability is the weight of the
// observations that took it plus the prior's share, prior_weight / number of choices.
std::vector<double> categorical_probabilities(size_t n_choices, const std::vector<double>& xs, double prior_weight) {
  const std::vector<double> w = trial_weights(xs.size());
  std::vector<double> p(n_choices, prior_weight / static_cast<double>(n_choices));
  for (size_t i = 0; i < xs.size(); ++i) p[static_cast<size_t>(xs[i])] += w[i];
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= total;
  return p;
}

}  // namespace

TPESampler::TPESampler(TPEOptions o) : options_(o), startup_(o.seed), gen_(o.seed ^ 0x9e3779b97f4a7c15ULL) {
  if (o.n_startup_trials < 1 || o.n_ei_candidates < 1 || !(o.prior_weight > 0))
    throw ValueError("TPESampler: n_startup_trials " + std::to_string(o.n_startup_trials) + ", n_ei_candidates " +
                     std::to_string(o.n_ei_candidates) + ", prior_weight " + std::to_string(o.prior_weight) +
                     " (valid: at least 1, at least 1, > 0)");
}

std::optional<Point> TPESampler::next(const SearchSpace& space, const std::vector<Observation>& observed) {
  if (static_cast<int64_t>(observed.size()) < options_.n_startup_trials) return startup_.next(space, observed);
  for (const Observation& o : observed) space.check(o.point);
  // Rank: complete trials by value, then stopped ones (further first, then by value); the
  // best gamma(n) are "below" (good), the rest "above". Each group keeps trial order.
  std::vector<size_t> rank(observed.size());
  std::iota(rank.begin(), rank.end(), 0);
  std::stable_sort(rank.begin(), rank.end(), [&observed](size_t a, size_t b) {
    const Observation &x = observed[a], &y = observed[b];
    if (x.complete != y.complete) return x.complete;
    if (!x.complete && x.steps != y.steps) return x.steps > y.steps;
    return x.value < y.value;
  });
  const size_t n_below = std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * static_cast<double>(observed.size()))), 25);
  std::vector<bool> is_below(observed.size(), false);
  for (size_t i = 0; i < std::max<size_t>(n_below, 1); ++i) is_below[rank[i]] = true;

  Point x(space.size());
  for (size_t d = 0; d < space.size(); ++d) {
    const Param& p = space.params()[d];
    std::vector<double> below, above;
    for (size_t i = 0; i < observed.size(); ++i) {
      const double v = p.kind == ParamKind::Categorical ? observed[i].point[d] : to_model(p, observed[i].point[d]);
      (is_below[i] ? below : above).push_back(v);
    }
    double best = 0, best_score = -INFINITY;
    if (p.kind == ParamKind::Categorical) {
      const std::vector<double> l = categorical_probabilities(p.choices.size(), below, options_.prior_weight);
      const std::vector<double> g = categorical_probabilities(p.choices.size(), above, options_.prior_weight);
      for (int64_t c = 0; c < options_.n_ei_candidates; ++c) {
        double u = unit(gen_), acc = 0;
        size_t k = 0;
        for (; k + 1 < l.size(); ++k)
          if ((acc += l[k]) > u) break;
        const double score = std::log(l[k]) - std::log(g[k]);
        if (score > best_score) {
          best_score = score;
          best = static_cast<double>(k);
        }
      }
    } else {
      const Range r = model_range(p);
      const Parzen l = parzen(r, below, options_.prior_weight), g = parzen(r, above, options_.prior_weight);
      for (int64_t c = 0; c < options_.n_ei_candidates; ++c) {
        const double m = l.sample(gen_);
        const double score = l.log_pdf(m) - g.log_pdf(m);
        if (score > best_score) {
          best_score = score;
          best = from_model(p, m);
        }
      }
    }
    x[d] = best;
  }
  return x;
}

}  // namespace loom::flow
