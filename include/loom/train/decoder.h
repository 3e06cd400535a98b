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
#include "loom/ops/quantized.h"
#include "loom/train/generation.h"
#include "loom/zoo/architectures.h"

namespace loom::train {

struct LOOM_API DecoderOptions {
  int64_t max_length = 0;  // positions each slot's cache holds; 0: the model's n_positions or max_position_embeddings
  int64_t slots = 1;       // sequences decoded side by side
  // Weight-only int8 (ops/quantized.h): every linear map of the blocks and the head is quantized
  // once, here, symmetric per output (int8_group 0) or per group of int8_group inputs, and read as
  // int8 at every token (a copy: training the network afterwards is not seen). Embeddings and
  // norms stay float. A network that carries int8 forms (zoo::Network::int8, from an int8
  // checkpoint) is decoded with them, as they are, whatever int8_weights says; int8_group must
  // then be 0 or their group (ValueError otherwise).
  bool int8_weights = false;
  int64_t int8_group = 0;
};

// Several sequences decode together in `slots`: each slot has its own cache and length, and one
// feed_slots() pass reads the weights once for the new tokens of every slot (no padding: a slot
// of 3 new tokens and one of 1 make a pass of 4 positions). The NextTokenModel functions use
// slot 0.
class LOOM_API CachedDecoder : public NextTokenModel {
 public:
  // Over `network`, a model built by zoo::gpt or zoo::llama (its `config` says which; ValueError
  // for any other), sharing its float weights: what trains the network changes what this
  // decodes. The caches (options.slots of options.max_length positions) are allocated here, once,
  // as the weights' dtype.
  explicit CachedDecoder(zoo::Network network, const DecoderOptions& options = {});

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
  // The bytes of the weights one token reads: the blocks' and the head's linear maps (int8 or
  // float) and the norms.
  int64_t weight_bytes() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace loom::train
