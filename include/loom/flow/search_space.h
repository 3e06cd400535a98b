#pragma once
// A declared hyper-parameter space and the samplers that propose points of it for flow::search
// (docs/workflow.md, "Search"): grid, random (seeded) and TPE, the Tree-structured Parzen
// Estimator as Optuna implements it. In flow rather than train: the samplers need nothing from
// training, and their one user is flow::search, whose trials are tasks of a store.
//
//   flow::SearchSpace space;
//   space.log_uniform("lr", 1e-4, 1e-1).integer("width", 16, 256).categorical("act", {"\"relu\"", "\"tanh\""});
//   flow::TPESampler tpe({.n_startup_trials = 10, .seed = 0});
//   std::optional<std::vector<double>> x = tpe.next(space, observed);   // one value per parameter
//   std::string hyper = space.to_json(*x);   // {"act":"tanh","lr":0.0031,"width":87}
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom::flow {

enum class ParamKind { Uniform, LogUniform, Int, Categorical };

struct LOOM_API Param {
  std::string name;
  ParamKind kind = ParamKind::Uniform;
  double low = 0;                    // Uniform, LogUniform, Int: the bounds, both included
  double high = 0;
  std::vector<std::string> choices;  // Categorical: JSON values ("0.5", "\"relu\"", "true", ...)
};

// A point of a space is one double per parameter, in declaration order: the value itself
// (an integral one for Int) or, for Categorical, the index of the choice.
using Point = std::vector<double>;

class LOOM_API SearchSpace {
 public:
  // Each ValueError (the space unchanged) for a name that is empty, longer than 128 bytes or
  // already declared; bounds that are not finite or low > high (LogUniform: low > 0); a
  // Categorical without choices or with a choice that is not one JSON value.
  SearchSpace& uniform(const std::string& name, double low, double high);
  SearchSpace& log_uniform(const std::string& name, double low, double high);
  SearchSpace& integer(const std::string& name, int64_t low, int64_t high);
  SearchSpace& categorical(const std::string& name, const std::vector<std::string>& choices);

  const std::vector<Param>& params() const { return params_; }
  size_t size() const { return params_.size(); }
  // The point as a JSON object of the parameters' values (canonical text, keys sorted);
  // ValueError for a point of the wrong size or out of the space.
  std::string to_json(const Point& point) const;
  // ValueError unless `point` lies in the space.
  void check(const Point& point) const;

 private:
  void add(Param p);
  std::vector<Param> params_;
};

// A finished (or stopped) trial as a sampler sees it: its point and the value to minimise.
struct LOOM_API Observation {
  Point point;
  double value = 0;      // smaller is better (a maximised metric is negated)
  bool complete = true;  // false: stopped early by the scheduler at `steps`
  int64_t steps = 0;     // the last step it reported (0: none)
};

class LOOM_API Sampler {
 public:
  virtual ~Sampler() = default;
  // The next point to try given the trials observed so far (in trial order), or nullopt when
  // the sampler has nothing left (a grid that is done).
  virtual std::optional<Point> next(const SearchSpace& space, const std::vector<Observation>& observed) = 0;
  virtual std::string name() const { return "custom"; }  // recorded with a search
};

// Every combination of the parameters' grid values, the last parameter varying fastest:
// Uniform and LogUniform take `points_per_axis` values evenly spaced (LogUniform on the log
// scale) from low to high; Int all its integers when there are at most points_per_axis of
// them, else points_per_axis evenly spaced ones (rounded, distinct); Categorical every choice.
class LOOM_API GridSampler : public Sampler {
 public:
  explicit GridSampler(int64_t points_per_axis = 5);  // ValueError below 2
  std::optional<Point> next(const SearchSpace& space, const std::vector<Observation>& observed) override;
  std::string name() const override { return "grid"; }
  // How many points the grid of `space` has.
  int64_t size(const SearchSpace& space) const;
  // The grid values of one parameter.
  std::vector<double> axis(const Param& p) const;

 private:
  int64_t points_per_axis_;
  int64_t next_ = 0;
};

// Independent draws: Uniform uniformly, LogUniform uniformly in log space, Int an integer of
// [low, high] with equal chances, Categorical a choice with equal chances. A seed gives the
// same sequence of points on every machine (a 64-bit Mersenne Twister read by Loom's own code).
class LOOM_API RandomSampler : public Sampler {
 public:
  explicit RandomSampler(uint64_t seed = 0) : gen_(seed) {}
  std::optional<Point> next(const SearchSpace& space, const std::vector<Observation>& observed) override;
  std::string name() const override { return "random"; }

 private:
  std::mt19937_64 gen_;
};

struct LOOM_API TPEOptions {
  int64_t n_startup_trials = 10;  // random points until this many trials are observed
  int64_t n_ei_candidates = 24;   // candidates drawn from l(x) per parameter
  double prior_weight = 1.0;      // the weight of the prior (a wide kernel over the range)
  uint64_t seed = 0;
};

// The Tree-structured Parzen Estimator (Bergstra et al. 2011) with Optuna's defaults
// (docs/workflow.md, "Search"): the observed trials are ranked (complete ones by value, then
// stopped ones, those that went further first) and split into the best gamma(n) = min(ceil(0.1 n),
// 25) and the rest; per parameter, a Parzen estimator of each group (truncated Gaussian kernels
// at the observations plus a prior; bandwidths from the neighbours' distances, clipped as Optuna
// does; older trials down-weighted past 25) gives l(x) and g(x); n_ei_candidates are drawn from
// l(x) and the one with the largest l(x) / g(x) is proposed. Parameters are modelled
// independently (Optuna's default, multivariate = false).
class LOOM_API TPESampler : public Sampler {
 public:
  explicit TPESampler(TPEOptions options = {});  // ValueError for n_startup_trials < 1, n_ei_candidates < 1, prior_weight <= 0
  std::optional<Point> next(const SearchSpace& space, const std::vector<Observation>& observed) override;
  std::string name() const override { return "tpe"; }

 private:
  TPEOptions options_;
  RandomSampler startup_;
  std::mt19937_64 gen_;
};

}  // namespace loom::flow
