// The data-parallel replica group (installed by loom::dist) and the differentiable sum over it.
#include "loom/nn/replicas.h"

#include <atomic>

#include "loom/autograd/autograd.h"
#include "ops/internal.h"

namespace loom::nn {

namespace {

std::atomic<ReplicaGroup*> installed{nullptr};

// A contiguous copy of `t` summed over the group (a copy: the caller's tensor stays as it was).
Tensor summed(ReplicaGroup& group, const Tensor& t) {
  NoGrad off;
  Tensor c = t.detach().copy();
  group.sum(c);
  return c;
}

}  // namespace

void set_replica_group(ReplicaGroup* group) { installed.store(group); }
ReplicaGroup* replica_group() { return installed.load(); }

Tensor replica_sum(const Tensor& x) {
  ReplicaGroup* group = replica_group();
  if (!group || group->size() <= 1) return x;
  Tensor y = summed(*group, x);
  if (!detail::needs_grad({&x})) return y;
  // d(sum_r x_r)/dx_q is the identity, and the loss is every replica's: each replica's input
  // gradient is the sum of the replicas' output gradients.
  return detail::record("replica_sum", {x}, y, [group](const Tensor& g) { return std::vector<Tensor>{summed(*group, g)}; });
}

}  // namespace loom::nn
