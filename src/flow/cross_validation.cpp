#include "loom/flow/cross_validation.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "flow/dependencies.h"

namespace loom::flow {

int64_t submit_cross_validation(Plans& plans, const CrossValidation& cv) {
  if (cv.n_splits < 2 || cv.n_splits > 1000)
    throw ValueError("cross-validation: n_splits " + std::to_string(cv.n_splits) + " (valid: 2 to 1000)");
  nlohmann::json base =
      nlohmann::json::parse(detail::canonical_json("cross-validation", "hyper_parameters", cv.hyper_parameters, true));
  for (const char* key : {"fold", "n_splits"})
    if (base.contains(key))
      throw ValueError(std::string("cross-validation: hyper_parameters hold \"") + key + "\", which each fold is given (valid: other keys)");
  base["n_splits"] = cv.n_splits;
  TaskGraph plan;
  plan.name = cv.name;
  PlanTask aggregate;
  aggregate.name = "aggregate";
  aggregate.kind = cv.aggregate_kind;
  aggregate.hyper_parameters = base.dump();
  aggregate.options = cv.aggregate_options;
  for (int64_t i = 0; i < cv.n_splits; ++i) {
    nlohmann::json h = base;
    h["fold"] = i;
    PlanTask fold;
    fold.name = "fold-" + std::to_string(i);
    fold.kind = cv.fold_kind;
    fold.hyper_parameters = h.dump();
    fold.options = cv.fold_options;
    plan.tasks.push_back(std::move(fold));
    aggregate.depends_on.push_back("fold-" + std::to_string(i));
  }
  plan.tasks.push_back(std::move(aggregate));
  return plans.submit(plan);
}

FoldSummary summarize_folds(const std::vector<DependencyResult>& folds, const std::string& metric) {
  if (folds.empty()) throw ValueError("summarize_folds: no folds (valid: the aggregate task's dependencies)");
  // In fold order: "fold-10" after "fold-9" (by number, then by name for other names).
  std::vector<const DependencyResult*> order;
  for (const DependencyResult& d : folds) order.push_back(&d);
  const auto number = [](const DependencyResult* d) {
    return d->name.rfind("fold-", 0) == 0 ? std::strtoll(d->name.c_str() + 5, nullptr, 10) : INT64_MAX;
  };
  std::stable_sort(order.begin(), order.end(), [&number](const DependencyResult* a, const DependencyResult* b) {
    return number(a) != number(b) ? number(a) < number(b) : a->task_id < b->task_id;
  });
  FoldSummary s;
  for (const DependencyResult* d : order) {
    const nlohmann::json r = nlohmann::json::parse(d->result, nullptr, false);
    if (!r.is_object() || !r.contains(metric) || !r[metric].is_number() || !std::isfinite(r[metric].get<double>()))
      throw ValueError("summarize_folds: the result of task " + std::to_string(d->task_id) + " ('" + d->name + "') has no number \"" +
                       metric + "\" (it is '" + d->result.substr(0, 200) + "')");
    s.values.push_back(r[metric].get<double>());
  }
  const double n = static_cast<double>(s.values.size());
  for (double v : s.values) s.mean += v / n;
  double var = 0;
  for (double v : s.values) var += (v - s.mean) * (v - s.mean) / n;
  s.std = std::sqrt(var);
  return s;
}

std::string FoldSummary::to_json() const {
  return nlohmann::json{{"mean", mean}, {"std", std}, {"folds", values}, {"n_splits", values.size()}}.dump();
}

}  // namespace loom::flow
