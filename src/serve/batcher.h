#pragma once
// Dynamic batching: requests queue up; one worker thread takes the first and every queued
// request of the same model version and signature (the inputs' dtypes and shapes past the batch
// dimension) up to max_batch rows, waiting at most max_wait for more, runs them as one call and
// hands each its rows. Only a request whose inputs all have the same number of rows, for a model
// whose outputs provably have one row per input row (Loaded::batchable), joins others: any other
// runs alone, since its answer could not be cut out of a batch's outputs.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loom/core/tensor.h"

namespace loom::serve::detail {

struct Loaded;  // a loaded model version (server.cpp)

struct BatchResult {
  std::vector<Tensor> outputs;  // this request's rows
  int64_t version = 0;          // the model version that computed them
};

class Batcher {
 public:
  // `run` computes a model version's outputs of (concatenated) inputs and says which version did.
  using Run = std::function<BatchResult(const Loaded& model, const std::vector<Tensor>& inputs)>;
  using Observe = std::function<void(int64_t requests, int64_t rows)>;
  Batcher(Run run, Observe observe, int64_t max_batch, int64_t max_wait_us, int64_t max_queue);
  ~Batcher();  // runs what is queued, then stops

  // Queues one request for `model`, the version its inputs were checked against and the one that
  // answers it (a versioned route must not be answered by the version the alias moved to while it
  // waited); nullopt when the queue is full. `batchable`: the model's outputs have one row per
  // input row (the batch dimension first in every input and output, by the shape rules); the
  // request then joins others when its inputs all have the same number of rows.
  std::optional<std::future<BatchResult>> submit(std::vector<Tensor> inputs, std::shared_ptr<const Loaded> model,
                                                 bool batchable);
  int64_t queued() const;

 private:
  struct Job {
    std::vector<Tensor> inputs;
    std::shared_ptr<const Loaded> model;
    int64_t rows = 0;       // every input's rows when it may join others (signature not "")
    std::string signature;  // "" for a job that runs alone
    std::promise<BatchResult> done;
    std::chrono::steady_clock::time_point queued;
  };
  void work();
  void run_batch(std::vector<Job>& jobs);

  Run run_;
  Observe observe_;
  int64_t max_batch_, max_queue_;
  std::chrono::microseconds max_wait_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace loom::serve::detail
