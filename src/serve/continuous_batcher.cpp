#include "continuous_batcher.h"

#include <algorithm>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"

namespace loom::serve::detail {

TextJob::Update TextJob::take() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !pending_.empty() || ended_; });
  Update u{std::move(pending_), ended_};
  pending_.clear();
  return u;
}

void TextJob::publish(const std::string& text, bool ended, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    pending_ += text;
    if (ended) {
      ended_ = true;
      error_ = error;
    }
  }
  changed_.notify_all();
}

ContinuousBatcher::ContinuousBatcher(train::CachedDecoder decoder, int64_t max_queue, int64_t prefill_chunk, Observers observers)
    : decoder_(std::move(decoder)),
      max_queue_(max_queue),
      prefill_chunk_(prefill_chunk),
      max_length_(decoder_.max_length()),
      observers_(std::move(observers)) {
  if (max_queue < 1 || prefill_chunk < 1)
    throw ValueError("ContinuousBatcher: max_queue and prefill_chunk must be >= 1, got " + std::to_string(max_queue) + " and " +
                     std::to_string(prefill_chunk));
  engine_ = std::thread([this] { loop(); });
}

ContinuousBatcher::~ContinuousBatcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  engine_.join();
}

std::shared_ptr<TextJob> ContinuousBatcher::submit(train::GenerationState state) {
  const auto length = static_cast<int64_t>(state.prompt().size());
  if (length > max_length_)
    throw ValueError("the prompt has " + std::to_string(length) + " tokens; the model's context holds " + std::to_string(max_length_));
  auto job = std::make_shared<TextJob>(std::move(state));
  {
    std::lock_guard lock(mutex_);
    if (static_cast<int64_t>(queue_.size()) >= max_queue_) return nullptr;
    queue_.push_back(job);
  }
  wake_.notify_all();
  return job;
}

BatcherStats ContinuousBatcher::stats() const {
  std::lock_guard lock(mutex_);
  return {active_count_, static_cast<int64_t>(queue_.size())};
}

void ContinuousBatcher::loop() {
  NoGrad no_grad;
  std::vector<int64_t> free_slots;
  for (int64_t s = decoder_.slots() - 1; s >= 0; --s) free_slots.push_back(s);
  std::vector<Active> active;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active.empty(); });
      if (stopping_ && queue_.empty() && active.empty()) return;
      // between passes: queued sequences take the free slots
      while (!free_slots.empty() && !queue_.empty()) {
        std::shared_ptr<TextJob> job = std::move(queue_.front());
        queue_.pop_front();
        if (job->state_.done()) {  // nothing to generate (max_new_tokens 0)
          job->publish("", true);
          continue;
        }
        const int64_t slot = free_slots.back();
        free_slots.pop_back();
        decoder_.reset(slot);
        active.push_back({std::move(job), slot});
      }
      active_count_ = static_cast<int64_t>(active.size());
    }
    pass(active);
    for (const Active& a : active)
      if (a.ended) free_slots.push_back(a.slot);
    std::erase_if(active, [](const Active& a) { return a.ended; });
  }
}

void ContinuousBatcher::pass(std::vector<Active>& active) {
  std::sort(active.begin(), active.end(), [](const Active& a, const Active& b) { return a.slot < b.slot; });
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(decoder_.slots()));
  std::vector<Active*> fed;  // in slot order: the rows of the pass's logits
  int64_t positions = 0;
  for (Active& a : active) {
    TextJob& job = *a.job;
    if (job.abandoned_) {
      job.state_.cancel();
      job.publish("", true);
      a.ended = true;
      continue;
    }
    const std::vector<int64_t>& prompt = job.state_.prompt();
    auto& t = tokens[static_cast<size_t>(a.slot)];
    if (a.fed < prompt.size()) {
      const size_t n = std::min(prompt.size() - a.fed, static_cast<size_t>(prefill_chunk_));
      t.assign(prompt.begin() + static_cast<std::ptrdiff_t>(a.fed), prompt.begin() + static_cast<std::ptrdiff_t>(a.fed + n));
    } else if (decoder_.length(a.slot) >= max_length_) {
      job.state_.cancel();  // not reached: the server bounds max_new_tokens by the context left
      job.publish("", true, "the sequence filled the model's context of " + std::to_string(max_length_) + " positions");
      a.ended = true;
      continue;
    } else {
      t = {a.last_token};
    }
    positions += static_cast<int64_t>(t.size());
    fed.push_back(&a);
  }
  if (fed.empty()) return;
  Tensor logits;
  try {
    logits = decoder_.feed_slots(tokens);
  } catch (const std::exception& e) {
    for (Active* a : fed) {
      a->job->state_.cancel();
      a->job->publish("", true, e.what());
      a->ended = true;
    }
    return;
  }
  if (observers_.pass) observers_.pass(static_cast<int64_t>(fed.size()), positions);
  for (size_t row = 0; row < fed.size(); ++row) {
    Active& a = *fed[row];
    TextJob& job = *a.job;
    const auto& prompt = job.state_.prompt();
    if (a.fed < prompt.size()) {
      a.fed += tokens[static_cast<size_t>(a.slot)].size();
      if (a.fed < prompt.size()) continue;  // more of the prompt next pass
    }
    train::GenerationState::Step step;
    try {
      step = job.state_.next(logits[static_cast<int64_t>(row)]);
    } catch (const std::exception& e) {  // the tokenizer's decode refusing a token, say: this sequence ends
      job.state_.cancel();
      job.publish("", true, e.what());
      a.ended = true;
      continue;
    }
    if (a.first && observers_.first_token)
      observers_.first_token(std::chrono::duration<double>(Clock::now() - job.queued_at_).count());
    a.first = false;
    if (observers_.token) observers_.token();
    a.last_token = step.token;
    job.publish(step.text, step.done);
    a.ended = step.done;
  }
}

}  // namespace loom::serve::detail
