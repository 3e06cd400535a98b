#pragma once
// Data-parallel training as Horovod and PyTorch DDP do it (docs/distributed.md): every rank
// runs the same model on its shard of each batch (data::LoaderOptions::shard, dist::shard()),
// the gradients are averaged over ranks before each step, and every rank applies the same
// update, so the parameters stay identical everywhere.
//
//   dist::DistributedOptimizer opt(std::make_shared<train::Adam>(params));
//   dist::broadcast_graph(graph);  // rank 0's initial weights and buffers everywhere
//   opt.broadcast_state();         // and its optimizer state (e.g. after loading a checkpoint)
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }  // step averages, then updates
#include <cstdint>
#include <memory>

#include "loom/core/api.h"
#include "loom/data/loader.h"
#include "loom/dist/dist.h"
#include "loom/graph/graph.h"
#include "loom/train/data_parallel.h"
#include "loom/train/optimizers.h"

namespace loom::dist {

// This rank's share of each epoch, for data::LoaderOptions::shard: {rank(), size()}.
LOOM_API data::Shard shard(bool drop_tail = false);

// Every parameter and buffer of `graph` (io::graph_state, by name) becomes rank `root`'s.
// ValueError when the ranks' graphs hold different tensor names; the broadcast's ShapeError or
// DTypeError, naming the tensor, when a tensor differs.
LOOM_API void broadcast_graph(const Graph& graph, int root = 0);

struct LOOM_API DistributedOptions {
  // Gradients are averaged in buckets of about this many bytes (consecutive parameters of one
  // dtype, from the last parameter to the first; a larger gradient is a bucket of its own):
  // one allreduce per bucket.
  int64_t bucket_bytes = 25 << 20;
  // Seconds one collective may wait for the other ranks before this process ends itself
  // (printing the collective, exit status 124) so that mpirun ends the job: a bound on a hang
  // (a rank stuck, or one that left fit by an exception and finalized). 0: wait forever. Set
  // for the whole process when fit starts or the DistributedOptimizer is made (docs/distributed.md).
  double collective_timeout = 0;
  // Start each bucket's allreduce during backward, as soon as its gradients are final, instead
  // of after it (the same results, bit for bit).
  bool overlap = true;
};

namespace detail {
class GradientBuckets;
}

class LOOM_API DistributedOptimizer {
 public:
  // Collective (every rank constructs it): checks that the ranks' parameters agree (ValueError
  // on every rank otherwise). With options.overlap, a hook on every parameter starts the
  // allreduces during backward; destroying the optimizer after a backward without a step
  // completes them (collective then too).
  explicit DistributedOptimizer(std::shared_ptr<train::Optimizer> optimizer, DistributedOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  train::Optimizer& optimizer() { return *optimizer_; }
  const std::shared_ptr<train::Optimizer>& shared() const { return optimizer_; }

  // The parameters and the optimizer state (buffers, step counters and lr: what
  // load_state_dict restores) of rank `root` on every rank.
  void broadcast_state(int root = 0);
  // Every gradient becomes its mean over ranks. A parameter with a gradient on some rank but
  // not on this one counts as a zero gradient here (an unused branch); one without a gradient
  // on every rank stays without.
  void average_gradients();
  // average_gradients(), then the optimizer's step().
  void step();
  void zero_grad() { optimizer_->zero_grad(); }
  // Buckets averaged by the last average_gradients(): those holding a gradient on some rank
  // (diagnostics, tests).
  int64_t last_bucket_count() const { return last_buckets_; }
  // Of those, the buckets whose allreduce started during backward (0 without overlap, or when
  // a gradient changed after its bucket started and the averaging was redone after backward).
  int64_t last_overlapped_count() const;

 private:
  std::shared_ptr<train::Optimizer> optimizer_;
  DistributedOptions options_;
  std::unique_ptr<detail::GradientBuckets> buckets_;
  int64_t last_buckets_ = 0;
};

// Model::fit data-parallel (FitOptions::distributed): at the start, the training loader becomes
// this rank's shard (when it is not one yet) and every rank rank 0's parameters, buffers and
// optimizer state, after checking that the ranks agree on the model, the batches per epoch,
// the epochs done and the loader position (ValueError naming the ranks, on every rank);
// gradients averaged in buckets before every step; logs averaged over the ranks.
LOOM_API std::shared_ptr<train::DataParallel> data_parallel(DistributedOptions options = {});

}  // namespace loom::dist
