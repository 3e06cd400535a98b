#pragma once
// Text for language modelling: a Vocabulary of whitespace tokens, files to token ids, and
// (batch, steps) windows over a token stream as in the PTB examples; token files and the
// (input, target) windows of a language model's training (TokenWindows).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/data/dataset.h"

namespace loom::data {

struct LOOM_API VocabularyOptions {
  int64_t min_count = 1;  // tokens seen fewer times map to <unk>
  int64_t max_size = 0;   // at most this many entries, specials included (0: no limit)
};

// Token <-> id. Ids 0, 1, 2 are the specials <pad>, <unk>, <eos>; the other tokens follow by
// decreasing count, ties in byte order, so a build is deterministic. A special token found in
// the text (PTB's "<unk>") maps to its special id.
class LOOM_API Vocabulary {
 public:
  static constexpr const char* kPad = "<pad>";
  static constexpr const char* kUnk = "<unk>";
  static constexpr const char* kEos = "<eos>";
  static constexpr int64_t kPadId = 0, kUnkId = 1, kEosId = 2;

  Vocabulary();  // the specials only
  // Counts the whitespace-separated tokens of a file (plain or gzip).
  static Vocabulary from_file(const std::string& path, const VocabularyOptions& options = {});
  static Vocabulary from_tokens(const std::vector<std::string>& tokens, const VocabularyOptions& options = {});
  // One token per line, in id order (as save() writes); the specials must come first.
  static Vocabulary load(const std::string& path);
  void save(const std::string& path) const;  // atomic

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  bool contains(const std::string& token) const { return ids_.count(token) != 0; }
  int64_t id(const std::string& token) const;  // kUnkId when unknown
  const std::string& token(int64_t id) const;  // throws IndexError outside [0, size())
  const std::vector<std::string>& tokens() const { return tokens_; }

  Tensor encode(const std::vector<std::string>& tokens) const;  // int64 (n,)
  std::vector<std::string> decode(const Tensor& ids) const;

 private:
  void add(const std::string& token);
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
};

// Splits on whitespace (spaces, tabs, line ends).
LOOM_API std::vector<std::string> split_tokens(const std::string& text);

// The token ids of a file (plain or gzip), int64 of shape (n,); with add_eos, an <eos> id ends
// every non-empty line (as the PTB language-model examples do).
LOOM_API Tensor tokenize_file(const std::string& path, const Vocabulary& vocab, bool add_eos = true);

// Cuts a 1-D stream of ids into batch_size rows of equal length (the tail that does not fill a
// row is dropped): shape (batch_size, n / batch_size), row r holding ids [r*L, (r+1)*L).
LOOM_API Tensor batchify(const Tensor& ids, int64_t batch_size);

// Windows for truncated backpropagation through time over batchify(ids, batch_size): window i
// is {input, target} with input = rows[:, i*steps : (i+1)*steps] and target the same shifted by
// one token. There are (L - 1) / steps windows (L the row length). get(i) returns window i as
// views (no copy); iterate i in order to carry hidden state from one window to the next.
class LOOM_API SequenceBatcher : public Dataset {
 public:
  SequenceBatcher(const Tensor& ids, int64_t batch_size, int64_t steps);
  int64_t size() const override { return n_windows_; }
  Example get(int64_t i) const override;
  const Tensor& rows() const { return rows_; }
  int64_t steps() const { return steps_; }

 private:
  Tensor rows_;
  int64_t steps_;
  int64_t n_windows_;
};

// Token files: the ids of a tokenized corpus as raw little-endian unsigned integers of 2 bytes
// (UInt16, nanoGPT's train.bin, vocabularies up to 65536) or 4 (UInt32), no header.
enum class TokenWidth : uint8_t { UInt16 = 2, UInt32 = 4 };

// Writes `ids` as a token file, atomically. Throws ValueError naming the first id that does not
// fit the width (or is negative).
LOOM_API void write_token_file(const std::string& path, const std::vector<int32_t>& ids, TokenWidth width);
// Reads a token file once into an int32 tensor (n,). Throws IOError for an unreadable file and
// ValueError for a size that is not a multiple of the width or a UInt32 id of 2^31 or more.
LOOM_API Tensor read_token_file(const std::string& path, TokenWidth width);

// (input, target) windows of `steps` tokens over a 1-D stream of ids, for training a language
// model on random windows: window i starts at s = i * stride, input = ids[s : s + steps] and
// target = ids[s + 1 : s + steps + 1] (the next token at each step). There are
// (n - steps - 1) / stride + 1 windows; the tail that fills no window is not used. get(i)
// returns views of `ids` (no copy per window; a batch copies once, when it is stacked). Shuffle
// with the loader (LoaderOptions{.shuffle = true, .seed = s}): a seeded permutation of the
// windows per epoch, the same for the same seed.
class LOOM_API TokenWindows : public Dataset {
 public:
  // ids: a 1-D integer tensor (read_token_file's, or a tokenizer's ids); stride 0 means steps
  // (windows side by side). Throws ValueError for steps < 1, stride < 0 or fewer than steps + 1 ids.
  TokenWindows(Tensor ids, int64_t steps, int64_t stride = 0);
  // Over a token file (read once, read_token_file).
  TokenWindows(const std::string& path, TokenWidth width, int64_t steps, int64_t stride = 0);
  int64_t size() const override { return n_windows_; }
  Example get(int64_t i) const override;
  const Tensor& ids() const { return ids_; }
  int64_t steps() const { return steps_; }
  int64_t stride() const { return stride_; }

 private:
  Tensor ids_;
  int64_t steps_ = 0, stride_ = 0, n_windows_ = 0;
};

}  // namespace loom::data
