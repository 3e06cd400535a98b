#pragma once
// A decoder-only language model of the zoo (zoo::gpt, zoo::llama) run incrementally with a
// key/value cache (docs/text.md, "The cached decoder"): the prompt in one pass (the fused
// attention over all its positions), then one pass per new token that computes only the new
// position and reads the keys and values of the earlier ones from the cache.
#include <cstdint>
#include <memory>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/train/generation.h"
#include "loom/zoo/models.h"

namespace loom::train {

// Several sequences decode together in `slots`: each slot has its own cache and length, and one
// feed_slots() pass reads the weights once for the new tokens of every slot (no padding: a slot
// of 3 new tokens and one of 1 make a pass of 4 positions). The NextTokenModel functions use
// slot 0.
class LOOM_API CachedDecoder : public NextTokenModel {
 public:
  // Over `network`, a model built by zoo::gpt or zoo::llama (its `config` says which; ValueError
  // for any other), sharing its weights: what trains the network changes what this decodes.
  // Each slot's cache holds `max_length` positions (0: the model's n_positions or
  // max_position_embeddings), allocated here, once, as the weights' dtype.
  explicit CachedDecoder(zoo::Network network, int64_t max_length = 0, int64_t slots = 1);

  // Forgets every position of slot 0 (the cache's memory is kept).
  void reset() override { reset(0); }
  // Feeds `tokens` to slot 0 after the positions it holds; returns the logits (vocab,) of the next token.
  Tensor feed(const std::vector<int64_t>& tokens) override;
  // The same, with the logits (n, vocab) of every token fed: position i's row predicts token i + 1.
  Tensor feed_all(const std::vector<int64_t>& tokens);
  // Feeds tokens[s] to slot s, every slot in one pass (an empty list leaves its slot as it is);
  // returns the next token's logits of each slot fed, (slots fed, vocab), in slot order. A slot
  // that cannot take its tokens is a ValueError before anything is fed.
  Tensor feed_slots(const std::vector<std::vector<int64_t>>& tokens);

  void reset(int64_t slot);
  // Keeps the first `length` positions of a slot (0 <= length <= length(slot)): a rejected
  // speculation or a beam's branch continues from there.
  void truncate(int64_t length, int64_t slot = 0);

  int64_t length(int64_t slot = 0) const;  // positions the slot holds
  int64_t slots() const;
  int64_t max_length() const;   // positions each slot can hold
  int64_t cache_bytes() const;  // the keys' and values' memory, every layer and slot

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace loom::train
