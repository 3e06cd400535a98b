#pragma once
// Gradient averaging in buckets, overlapped with backward as PyTorch DDP does it
// (docs/distributed.md, "Gradient averaging"). Internal to loom::dist.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "loom/autograd/hooks.h"
#include "loom/core/tensor.h"

namespace loom::dist::detail {

// The buckets of a fixed list of parameters: in reverse order (the order backward usually
// finishes their gradients), consecutive ones of one dtype up to bucket_bytes (a larger one
// alone). Each round (one average()) every rank starts every bucket's allreduce, in index
// order, on the gradient communicator; with `overlap`, a bucket starts during backward as soon
// as its gradients and those of every bucket before it are final (a hook per parameter),
// otherwise in average(). Both give the same bits: same buffers, same calls.
class GradientBuckets {
 public:
  // Collective: every rank must pass parameters of the same dtypes and sizes (ValueError on
  // every rank otherwise). `who` starts error messages.
  GradientBuckets(std::vector<Tensor> params, int64_t bucket_bytes, bool overlap, std::string who);
  // Completes a round in progress (a backward without average()): collective then.
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Every gradient becomes its mean over ranks (zeros for a parameter without a gradient here
  // but with one elsewhere; none stays none everywhere). Returns the buckets holding a
  // gradient on some rank.
  int64_t average();
  // Completes the round in progress, discarding it (every rank at once, after a failure).
  void abandon() noexcept;
  // Buckets started during backward in the last average() (0 after a fallback).
  int64_t started_in_backward() const { return last_early_; }
  // Whether these are the parameters the buckets were built for.
  bool built_for(const std::vector<Tensor>& params) const;

 private:
  struct Bucket {
    std::vector<size_t> members;  // parameter indices, in bucket order
    std::vector<int64_t> offsets; // of each member in `flat`
    Tensor flat;                  // float32 (float64 for float64 parameters)
    int remaining = 0;            // members whose gradient has not come in this round
    bool started = false, early = false;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void on_ready(size_t param, const Tensor& grad);
  void start(Bucket& b, bool early);
  void start_rest();
  void wait_all();
  void reset();
  bool in_progress() const;

  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<Tensor> got_;  // this round's gradient of each parameter, from its hook
  std::vector<uint64_t> got_version_;  // its storage's version when its bucket started
  std::vector<GradHookHandle> hooks_;
  size_t next_ = 0;        // the next bucket to start
  bool dirty_ = false;     // a gradient changed after its bucket started: redo the round
  int64_t bad_ = -1;       // a parameter whose gradient has another size (this rank)
  int64_t last_early_ = 0;
  std::string who_;
  std::mutex mutex_;       // backward may run on another thread than average()
};

}  // namespace loom::dist::detail
