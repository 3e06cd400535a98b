#pragma once
// Hooks that backward() calls on leaves (include this header; loom.h does not).
#include <cstdint>
#include <functional>
#include <memory>

#include "loom/core/api.h"
#include "loom/core/node.h"
#include "loom/core/tensor.h"

namespace loom {

// Post-accumulate-grad hooks (PyTorch's register_post_accumulate_grad_hook): during backward(),
// once per pass, `hook` gets the leaf's gradient as soon as it is final (after the last
// contribution; not for a leaf that receives none, nor in grad()). It is the value .grad()
// holds once backward returns: .grad() itself is assigned at the end of the pass, all or
// nothing. An exception from a hook ends backward() with every .grad() unchanged: loom::Errors
// as they are, others as AutogradError. Hooks run on the thread running backward(), in the
// order they were added (a hook removed during a pass may still run once in it).
class LOOM_API GradHookHandle {
 public:
  GradHookHandle() = default;
  GradHookHandle(GradHookHandle&& o) noexcept : id_(o.id_), node_(std::move(o.node_)) { o.id_ = 0; }
  GradHookHandle& operator=(GradHookHandle&& o) noexcept;
  GradHookHandle(const GradHookHandle&) = delete;
  GradHookHandle& operator=(const GradHookHandle&) = delete;
  ~GradHookHandle() { remove(); }
  void remove() noexcept;  // the hook does not run again (idempotent)
  bool active() const { return id_ != 0; }

 private:
  friend GradHookHandle on_grad_accumulated(const Tensor&, std::function<void(const Tensor&)>);
  uint64_t id_ = 0;
  std::shared_ptr<Node> node_;  // the leaf's accumulator, kept alive while the hook is
};

// Adds `hook` to `leaf` (a tensor that requires grad and was made by no op: AutogradError
// otherwise) until the returned handle is destroyed or removed.
[[nodiscard]] LOOM_API GradHookHandle on_grad_accumulated(const Tensor& leaf, std::function<void(const Tensor& grad)> hook);

}  // namespace loom
