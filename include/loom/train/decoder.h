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

class LOOM_API CachedDecoder : public NextTokenModel {
 public:
  // Over `network`, a model built by zoo::gpt or zoo::llama (its `config` says which; ValueError
  // for any other), sharing its weights: what trains the network changes what this decodes.
  // The cache holds `max_length` positions (0: the model's n_positions or
  // max_position_embeddings), allocated here, once, as the weights' dtype.
  explicit CachedDecoder(zoo::Network network, int64_t max_length = 0);

  // Forgets every position (the cache's memory is kept).
  void reset() override;
  // Feeds `tokens` after the positions held; returns the logits (vocab,) of the next token.
  Tensor feed(const std::vector<int64_t>& tokens) override;
  // The same, with the logits (n, vocab) of every token fed: position i's row predicts token i + 1.
  Tensor feed_all(const std::vector<int64_t>& tokens);
  // Keeps the first `length` positions (0 <= length <= length()): a rejected speculation or a
  // beam's branch continues from there.
  void truncate(int64_t length);

  int64_t length() const;      // positions held
  int64_t max_length() const;  // positions the cache can hold
  int64_t cache_bytes() const; // the keys' and values' memory, every layer

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace loom::train
