#pragma once
// Learning curves as an SVG image: one panel per quantity (loss, then each metric), the
// training series solid and the validation series ("val_" prefix) dashed.
#include <string>

#include "loom/core/api.h"
#include "loom/train/history.h"

namespace loom::train {

LOOM_API std::string learning_curves_svg(const History& history, const std::string& title = "Learning curves");
// Writes the SVG atomically; throws IOError naming the path.
LOOM_API void save_learning_curves(const History& history, const std::string& path, const std::string& title = "Learning curves");

}  // namespace loom::train
