#pragma once
// A node of the autograd graph: the backward rule of one op application. `next[i]` is the
// node that receives the gradient of input i (null when input i needs none).
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

class LOOM_API Node {
 public:
  // Not recursive: a node holds the next ones, so a chain of a million ops would otherwise be
  // destroyed a stack frame per node (docs/autograd.md).
  virtual ~Node();
  // Gradients of the inputs given the gradient of the output; an undefined Tensor means zero.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual const char* name() const = 0;
  // Adds the gradient of the node's only input into `sum`, a contiguous gradient of that
  // input's shape and dtype which the engine alone holds (the other contributions to it, summed
  // so far), instead of returning it; false when the rule cannot, and apply() runs. A scatter's
  // rule (embedding) adds a few rows here where apply() builds a whole zero-filled table that
  // the engine then adds: a table shared by two lookups is written once, not three times.
  virtual bool add_into(const Tensor& grad_output, Tensor& sum) {
    (void)grad_output;
    (void)sum;
    return false;
  }
  // Drops what apply() needs (the tensors saved for the rule) once a backward pass that does
  // not retain the graph has run it; apply() afterwards throws AutogradError.
  virtual void release() {}
  std::vector<std::shared_ptr<Node>> next;
};

// The sink of a leaf tensor: adds incoming gradients to the leaf's .grad(). The engine keeps
// a pass's gradients and sums them into the leaves' .grad() only once the whole pass has
// succeeded (under locks that other threads' passes into the same leaves take too,
// docs/autograd.md), so a failing backward (out of memory, ...) leaves every .grad() unchanged.
class LOOM_API AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::weak_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;  // accumulates at once
  // The leaf's .grad() after adding `grad_output` (undefined when the leaf is gone); the leaf
  // itself is not changed.
  Tensor accumulated(const Tensor& grad_output) const;
  const char* name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// The node that receives the gradient of `t`: its grad_fn, or its leaf accumulator, or null.
LOOM_API std::shared_ptr<Node> gradient_edge(const Tensor& t);

}  // namespace loom
