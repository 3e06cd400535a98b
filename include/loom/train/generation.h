#pragma once
// Choosing the next token of a language model from its logits (docs/text.md, "Generation"):
// greedy, temperature, top-k, top-p (nucleus), min-p and the repetition penalty, applied in
// transformers' order with a seeded loom::Generator; and the text of a stream of token bytes cut
// at whole UTF-8 characters.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/ops/random.h"

namespace loom::train {

// How the next token is chosen. temperature 0 is greedy (the largest logit; transformers'
// do_sample=False); otherwise a draw from softmax(logits / temperature) restricted to the top_k
// largest (0: all), to the smallest set whose probability reaches top_p (1: all), and to those
// whose probability is at least min_p times the largest's (0: all). repetition_penalty (CTRL's,
// as transformers applies it before everything else): the logit of every token already in the
// history is divided by it when positive and multiplied by it when negative (1: none).
struct LOOM_API SamplingOptions {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
};

// The next token for logits (vocab,) (any floating dtype), given the ids so far; draws one
// uniform number from `generator` unless greedy (ties: the lowest id). ValueError for options
// out of range (naming them) or logits that are not a 1-d float tensor of at least one value.
LOOM_API int64_t sample_token(const Tensor& logits, const SamplingOptions& options, const std::vector<int64_t>& history,
                              Generator& generator);

// The bytes of streamed tokens as text in whole UTF-8 characters: push() returns what can be
// shown now and keeps an incomplete character's first bytes until the token that completes it
// (a byte-level BPE token may end inside a character); finish() returns what is left. A byte
// that can start or continue no character is passed through as it is, never held back forever.
class LOOM_API Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace loom::train
