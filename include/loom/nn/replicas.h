#pragma once
// The processes that train copies of one model together (data-parallel replicas), for layers
// whose training step reduces over all of them (synchronized batch norm). libloom has no
// transport: loom::dist installs one for the life of its Context (docs/distributed.md).
// Without one, the replicas are this process alone.
#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::nn {

class LOOM_API ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int size() const = 0;
  // `t` (a contiguous CPU tensor) becomes its sum over the replicas, in place; every replica
  // calls it in the same order.
  virtual void sum(Tensor& t) = 0;
};

// The installed group (nullptr: none). Install from one thread, before training.
LOOM_API void set_replica_group(ReplicaGroup* group);
LOOM_API ReplicaGroup* replica_group();

// The sum of `x` over the replicas (x itself without a group of more than one), differentiable:
// the gradient of each replica's input is the sum over the replicas of their output gradients.
LOOM_API Tensor replica_sum(const Tensor& x);

}  // namespace loom::nn
