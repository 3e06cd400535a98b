#pragma once
// Every evaluation of a layer graph runs in a mode: Train (dropout active, batch norm uses batch
// statistics) or Eval. The mode is per thread; Eval unless a ModeScope says otherwise.
#include <cstdint>

#include "loom/core/api.h"

namespace loom::nn {

enum class Mode : uint8_t { Eval, Train };

LOOM_API Mode current_mode();

class LOOM_API ModeScope {
 public:
  explicit ModeScope(Mode mode);
  ~ModeScope();
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;

 private:
  Mode previous_;
};

}  // namespace loom::nn
