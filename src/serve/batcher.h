#pragma once
// Dynamic batching: requests queue up; one worker thread takes the first and every queued
// request of the same signature (the inputs' shapes past the batch dimension) up to max_batch
// rows, waiting at most max_wait for more, runs them as one call and hands each its rows.
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

struct BatchResult {
  std::vector<Tensor> outputs;  // this request's rows
  int64_t version = 0;          // the model version that computed them
};

class Batcher {
 public:
  // `run` computes the outputs of concatenated inputs and says which version did; `batched`
  // tells whether the model's outputs can be split by rows (each has the batch dimension first).
  using Run = std::function<BatchResult(const std::vector<Tensor>& inputs)>;
  using Observe = std::function<void(int64_t requests, int64_t rows)>;
  Batcher(Run run, Observe observe, int64_t max_batch, int64_t max_wait_us, int64_t max_queue);
  ~Batcher();  // runs what is queued, then stops

  // Queues one request (inputs with the batch dimension first); nullopt when the queue is full.
  std::optional<std::future<BatchResult>> submit(std::vector<Tensor> inputs, bool batchable);
  int64_t queued() const;

 private:
  struct Job {
    std::vector<Tensor> inputs;
    int64_t rows = 0;
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
