#pragma once
// Continuous batching of text generation (docs/serve.md, "Generation"): one engine thread runs a
// CachedDecoder of `slots` sequences; between two passes a finished or abandoned sequence leaves
// its slot and a queued one takes it, so a pass feeds every active sequence at once (a newcomer's
// prompt, in chunks of at most prefill_chunk tokens, next to the others' one new token each) and
// the weights are read once for all of them. A sequence's tokens do not depend on who shares its
// passes: a decoder of several slots computes its products batch-invariantly (docs/kernels.md,
// "Batch-invariant products") and each sequence draws from its own seeded generator.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loom/train/decoder.h"
#include "loom/train/generation.h"

namespace loom::serve::detail {

using Clock = std::chrono::steady_clock;

// One request's sequence: the engine writes its text as it comes, the request's worker takes it.
class TextJob {
 public:
  explicit TextJob(train::GenerationState state) : state_(std::move(state)), queued_at_(Clock::now()) {}

  struct Update {
    std::string text;   // new text since the last take
    bool ended = false;  // nothing more comes (result() and error() are final)
  };
  // Waits for new text or the end.
  Update take();
  // The requester is gone (its client closed the connection): the sequence leaves at the next pass.
  void abandon() { abandoned_ = true; }

  // After the end:
  const train::Generation& result() const { return state_.result(); }
  const std::string& error() const { return error_; }  // non-empty when the model failed on it
  int64_t prompt_tokens() const { return static_cast<int64_t>(state_.prompt().size()); }

 private:
  friend class ContinuousBatcher;
  void publish(const std::string& text, bool ended, const std::string& error = "");

  train::GenerationState state_;  // the engine's only, until ended
  Clock::time_point queued_at_;
  std::atomic<bool> abandoned_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string pending_;
  bool ended_ = false;
  std::string error_;
};

struct BatcherStats {
  int64_t active = 0;  // sequences in slots
  int64_t queued = 0;  // waiting for a slot
};

class ContinuousBatcher {
 public:
  // Observers, called on the engine thread: a pass of `positions` fed positions for `sequences`,
  // a sequence's first token `seconds` after it was queued, and each token generated.
  struct Observers {
    std::function<void(int64_t sequences, int64_t positions)> pass;
    std::function<void(double seconds)> first_token;
    std::function<void()> token;
  };
  ContinuousBatcher(train::CachedDecoder decoder, int64_t max_queue, int64_t prefill_chunk, Observers observers);
  ~ContinuousBatcher();  // finishes the sequences admitted and queued, then stops

  // Queues a sequence; nullptr when max_queue sequences already wait.
  std::shared_ptr<TextJob> submit(train::GenerationState state);
  BatcherStats stats() const;
  int64_t max_length() const { return max_length_; }

 private:
  struct Active {
    std::shared_ptr<TextJob> job;
    int64_t slot = 0;
    size_t fed = 0;          // prompt tokens fed so far
    int64_t last_token = -1;  // the token to feed next once the prompt is in
    bool first = true;       // no token chosen yet
    bool ended = false;      // published as ended: the slot is free after this pass
  };
  void loop();
  void pass(std::vector<Active>& active);

  train::CachedDecoder decoder_;
  int64_t max_queue_, prefill_chunk_, max_length_;
  Observers observers_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<TextJob>> queue_;
  int64_t active_count_ = 0;
  bool stopping_ = false;
  std::thread engine_;
};

}  // namespace loom::serve::detail
