#pragma once
// Cross-validation as a plan (docs/workflow.md, "Cross-validation"): k fold tasks, which agents
// anywhere run in parallel, and an aggregate task that depends on them and reads their results.
//
//   flow::Plans plans(tasks);
//   int64_t plan = flow::submit_cross_validation(plans, {.fold_kind = "fold", .aggregate_kind = "cv-mean",
//                                                       .n_splits = 5, .hyper_parameters = R"({"lr": 0.1})"});
//   // an agent's "fold" task: hyper-parameters {"lr": 0.1, "fold": i, "n_splits": 5}; it trains
//   // on data::KFold(5, ...).split(n)[i].train and returns {"accuracy": ...}
//   agent.register_kind("cv-mean", [](const std::string&, flow::TaskContext& ctx) {
//     return flow::summarize_folds(ctx.claim().dependencies, "accuracy").to_json();
//   });
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/flow/plans.h"
#include "loom/flow/tasks.h"

namespace loom::flow {

struct LOOM_API CrossValidation {
  std::string name = "cross-validation";  // the plan's name
  std::string fold_kind;                  // the kind of the n_splits fold tasks ("fold-0", "fold-1", ...)
  std::string aggregate_kind;             // the kind of the task "aggregate", depending on every fold
  int64_t n_splits = 5;                   // 2 to 1000
  // Every fold's hyper-parameters, to which "fold" (0 to n_splits - 1) and "n_splits" are added
  // (a JSON object without those keys); the aggregate gets them with "n_splits" only.
  std::string hyper_parameters = "{}";
  TaskOptions fold_options, aggregate_options;
};

// Submits the plan (Plans::submit: one transaction) and returns its id. ValueError (nothing
// written) for n_splits out of range, hyper_parameters that are not an object or that hold
// "fold" or "n_splits", and as Plans::submit for kinds and options.
LOOM_API int64_t submit_cross_validation(Plans& plans, const CrossValidation& cv);

struct LOOM_API FoldSummary {
  std::vector<double> values;  // each fold's metric, in fold order
  double mean = 0;
  double std = 0;              // the population standard deviation (numpy's default, ddof = 0)
  // {"mean": ..., "std": ..., "folds": [...], "n_splits": k}
  std::string to_json() const;
};

// The metric of each fold from the aggregate task's dependencies (Claim::dependencies), their
// mean and standard deviation. ValueError naming the task when a fold has not finished or its
// result has no finite number `metric`, or when there are no folds.
LOOM_API FoldSummary summarize_folds(const std::vector<DependencyResult>& folds, const std::string& metric);

}  // namespace loom::flow
