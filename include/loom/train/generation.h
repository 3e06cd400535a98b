#pragma once
// Text generation (docs/text.md, "Generation"): choosing the next token of a language model from
// its logits (greedy, temperature, top-k, top-p (nucleus), min-p and the repetition penalty,
// applied in transformers' order with a seeded loom::Generator), the text of a stream of token
// bytes cut at whole UTF-8 characters, and generate(), the loop of both over a model that is fed
// tokens and answers the next token's logits.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/ops/random.h"
#include "loom/zoo/architectures.h"

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

// A language model as generate() drives it: fed tokens one batch after another, it answers the
// logits of the token that follows all it was fed since reset(). A model with a key/value cache
// reads only the new tokens; RecomputingModel below reads the whole text each time.
class LOOM_API NextTokenModel {
 public:
  virtual ~NextTokenModel() = default;
  // Forgets every token fed so far.
  virtual void reset() = 0;
  // Feeds `tokens` (at least one) after those fed before; returns the logits (vocab,) of the next.
  virtual Tensor feed(const std::vector<int64_t>& tokens) = 0;
};

// A causal language model that is a layer graph with one input, ids (1, T) int64, and one output,
// logits (1, T, vocab), run on the text so far at every token (no cache). When the graph's input
// has a fixed length T, the text's last T tokens are given, padded on the right with `pad_id`
// (causal attention never looks at later positions, so the padding changes nothing).
class LOOM_API RecomputingModel : public NextTokenModel {
 public:
  explicit RecomputingModel(zoo::Network network, int64_t pad_id = 0);
  void reset() override { tokens_.clear(); }
  Tensor feed(const std::vector<int64_t>& tokens) override;

 private:
  zoo::Network network_;
  int64_t window_ = -1;  // the input's fixed length, or -1
  int64_t pad_id_ = 0;
  std::vector<int64_t> tokens_;
};

struct LOOM_API GenerationOptions {
  SamplingOptions sampling;  // how each token is chosen (greedy when sampling.temperature is 0)
  int64_t max_new_tokens = 128;
  std::vector<int64_t> stop_tokens;       // generation ends after one of these (kept in the tokens, not in the text)
  std::vector<std::string> stop_strings;  // or when the text reaches one of these (the text is cut before it)
  uint64_t seed = 0;                      // of the draws: the same seed, model and prompt give the same tokens
};

struct LOOM_API Generation {
  std::vector<int64_t> tokens;  // the new tokens (the prompt's not included)
  std::string text;             // their text (when generate() was given a decode function)
  enum class Finish { Length, StopToken, StopString, Callback } finish = Finish::Length;
};

// The text of a sequence of token ids (a tokenizer's decode).
using DecodeFn = std::function<std::string(const std::vector<int64_t>& ids)>;
// Called with each new token and the text it completes (whole UTF-8 characters only: a token that
// ends inside a character shows nothing until the one that completes it); returning false stops.
using OnToken = std::function<bool(int64_t token, std::string_view text)>;

// One sequence's generation step by step, for a caller that runs the model itself (the server's
// continuous batching feeds many sequences to one CachedDecoder pass): next() is given the logits
// that follow the prompt, then those that follow each token it chose, and chooses as generate()
// does, with the same stops, holdback of text that may begin a stop string, and seeded draws.

class LOOM_API GenerationState {
 public:
  // ValueError as generate() for an empty prompt, max_new_tokens < 0, stop strings without
  // decode, or sampling options out of range.
  GenerationState(std::vector<int64_t> prompt, GenerationOptions options, DecodeFn decode = {});

  struct Step {
    int64_t token = -1;
    std::string text;   // what the token adds to the text shown (whole characters, none that may begin a stop string)
    bool done = false;  // no more tokens: result().finish says why
  };
  // The next token from the logits (vocab,) that follow the sequence so far. ValueError once done().
  Step next(const Tensor& logits);
  // Ends the generation (finish Callback, unless a stop string ended it); returns the text held
  // back until now (bytes that might have begun a stop string, an unfinished character).
  std::string cancel();

  bool done() const { return done_; }
  const Generation& result() const { return out_; }
  // The tokens decoded at each step (src/train/generation.cpp, new_text): those from `start` on,
  // whose settled text, `given`, is out already.
  struct DecodeWindow {
    size_t start = 0;
    std::string given;
  };
  const std::vector<int64_t>& prompt() const { return prompt_; }

 private:
  std::string show(bool all);

  std::vector<int64_t> prompt_;
  GenerationOptions options_;
  DecodeFn decode_;
  Generator generator_;
  std::vector<int64_t> history_;
  Generation out_;
  DecodeWindow window_;  // the tokens decoded at each step, and the text of their settled part
  Utf8Stream stream_;
  size_t shown_ = 0;  // the bytes of out_.text handed out as Step::text
  bool done_ = false;
};

// Feeds the prompt to `model` (after reset()), then chooses one token at a time with
// options.sampling (repetition penalty over prompt and new tokens) until max_new_tokens, a stop
// token, a stop string or the callback ends it. Stop strings need `decode`. ValueError for an
// empty prompt, max_new_tokens < 0, stop strings without decode, or sampling options out of range.
LOOM_API Generation generate(NextTokenModel& model, const std::vector<int64_t>& prompt, const GenerationOptions& options,
                             const DecodeFn& decode = {}, const OnToken& on_token = {});

}  // namespace loom::train
