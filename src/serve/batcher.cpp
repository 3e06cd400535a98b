#include "batcher.h"

#include "loom/ops/manipulation.h"

namespace loom::serve::detail {

Batcher::Batcher(Run run, Observe observe, int64_t max_batch, int64_t max_wait_us, int64_t max_queue)
    : run_(std::move(run)), observe_(std::move(observe)), max_batch_(max_batch), max_queue_(max_queue),
      max_wait_(max_wait_us), worker_([this] { work(); }) {}

Batcher::~Batcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

int64_t Batcher::queued() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(queue_.size());
}

std::optional<std::future<BatchResult>> Batcher::submit(std::vector<Tensor> inputs, std::shared_ptr<const Loaded> model,
                                                        bool batchable) {
  Job job;
  job.model = std::move(model);
  // A request's share of a batch is its rows in every input: inputs of different row counts (or
  // without a batch dimension) leave no row count to cut its outputs by, so it runs alone.
  bool rows_agree = batchable && !inputs.empty();
  for (const Tensor& t : inputs) rows_agree = rows_agree && t.ndim() > 0 && t.shape()[0] == inputs[0].shape()[0];
  job.rows = inputs.empty() || inputs[0].ndim() == 0 ? 1 : inputs[0].shape()[0];  // alone: counted in /metrics only
  if (rows_agree) {
    for (const Tensor& t : inputs) {
      job.signature += std::to_string(static_cast<int>(t.dtype())) + ":";
      for (int64_t d = 1; d < t.ndim(); ++d) job.signature += std::to_string(t.shape()[d]) + ",";
      job.signature += ";";
    }
  }
  job.inputs = std::move(inputs);
  job.queued = std::chrono::steady_clock::now();
  auto future = job.done.get_future();
  {
    std::lock_guard lock(mutex_);
    if (static_cast<int64_t>(queue_.size()) >= max_queue_) return std::nullopt;
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return future;
}

void Batcher::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const std::string signature = queue_.front().signature;
    const std::shared_ptr<const Loaded> model = queue_.front().model;
    // jobs of one batch: the same signature and the same model version (a reload between two
    // requests leaves each on the version it was checked against)
    auto joins = [&](const Job& j) { return !signature.empty() && j.signature == signature && j.model == model; };
    auto rows_ready = [&] {
      int64_t rows = 0;
      for (const Job& j : queue_)
        if (joins(j)) rows += j.rows;
      return rows;
    };
    if (!signature.empty()) {  // wait for more of the same kind, up to the first one's deadline
      const auto deadline = queue_.front().queued + max_wait_;
      while (!stopping_ && rows_ready() < max_batch_ && std::chrono::steady_clock::now() < deadline)
        cv_.wait_until(lock, deadline);
    }
    std::vector<Job> jobs;
    int64_t rows = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const bool first = jobs.empty();
      if (first || (joins(*it) && rows + it->rows <= max_batch_)) {
        rows += it->rows;
        jobs.push_back(std::move(*it));
        it = queue_.erase(it);
        if (signature.empty()) break;
      } else {
        ++it;
      }
    }
    lock.unlock();
    run_batch(jobs);
    if (observe_) observe_(static_cast<int64_t>(jobs.size()), rows);
    lock.lock();
  }
}

void Batcher::run_batch(std::vector<Job>& jobs) {
  try {
    if (jobs.size() == 1) {
      jobs[0].done.set_value(run_(*jobs[0].model, jobs[0].inputs));
      return;
    }
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < jobs[0].inputs.size(); ++k) {
      std::vector<Tensor> parts;
      for (const Job& j : jobs) parts.push_back(j.inputs[k]);
      inputs.push_back(concatenate(parts, 0));
    }
    BatchResult all = run_(*jobs[0].model, inputs);
    int64_t total = 0;
    for (const Job& j : jobs) total += j.rows;
    bool rows_follow = true;
    for (const Tensor& o : all.outputs) rows_follow = rows_follow && o.ndim() > 0 && o.shape()[0] == total;
    if (!rows_follow) {  // the shape rules promised a row per row and the outputs disagree: no cutting
      for (Job& j : jobs) {
        try {
          j.done.set_value(run_(*j.model, j.inputs));
        } catch (...) {
          j.done.set_exception(std::current_exception());
        }
      }
      return;
    }
    int64_t start = 0;
    for (Job& j : jobs) {
      BatchResult mine{{}, all.version};
      for (const Tensor& o : all.outputs) mine.outputs.push_back(slice(o, 0, start, start + j.rows).contiguous());
      start += j.rows;
      j.done.set_value(std::move(mine));
    }
  } catch (...) {
    for (Job& j : jobs) {
      try {
        j.done.set_exception(std::current_exception());
      } catch (const std::future_error&) {  // this job had its value already
      }
    }
  }
}

}  // namespace loom::serve::detail
