#include "loom/train/history.h"

#include <algorithm>

#include "loom/core/error.h"

namespace loom::train {

const std::vector<double>& History::operator[](const std::string& name) const {
  auto it = series.find(name);
  if (it == series.end()) {
    std::string known;
    for (const auto& [k, v] : series) known += (known.empty() ? "" : ", ") + k;
    throw ValueError("History: no series '" + name + "' (recorded: " + (known.empty() ? "none" : known) + ")");
  }
  return it->second;
}

size_t History::epochs() const {
  size_t n = 0;
  for (const auto& [k, v] : series) n = std::max(n, v.size());
  return n;
}

}  // namespace loom::train
