#pragma once

#include "loom/core/api.h"
// Whether ops record the autograd graph on this thread (on by default).

namespace loom {

LOOM_API bool grad_enabled();
LOOM_API void set_grad_enabled(bool enabled);

// Sets recording for the current thread while alive: GradModeScope(true) turns it back on
// inside a NoGrad region (a backward pass with create_graph); turning it off is NoGrad.
class LOOM_API GradModeScope {
 public:
  explicit GradModeScope(bool enabled);
  ~GradModeScope();
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

// Ops inside do not record gradients (inference, in-place updates of parameters).
class LOOM_API NoGrad : public GradModeScope {
 public:
  NoGrad() : GradModeScope(false) {}
};

}  // namespace loom
