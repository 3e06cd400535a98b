#pragma once
// What a training run records per epoch: named series such as "loss", "accuracy",
// "val_loss", "val_accuracy", "lr".
#include <map>
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom::train {

struct LOOM_API History {
  std::map<std::string, std::vector<double>> series;

  void append(const std::string& name, double value) { series[name].push_back(value); }
  const std::vector<double>& operator[](const std::string& name) const;
  bool has(const std::string& name) const { return series.count(name) > 0; }
  size_t epochs() const;  // the length of the longest series
};

}  // namespace loom::train
