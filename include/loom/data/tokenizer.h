#pragma once
// Subword tokenizers for language models (docs/text.md):
// - BpeTokenizer: byte-level BPE as GPT-2 and Llama 3 use it, read from a Hugging Face
//   `tokenizer.json` (vocabulary, merges, the pre-tokenizer's regular expressions run by PCRE2,
//   added and special tokens); its ids equal those of PyPI `tokenizers` on valid UTF-8.
// - SentencePieceTokenizer: a SentencePiece `tokenizer.model` (Llama 2's kind) through Debian's
//   libsentencepiece, and train_sentencepiece() for a BPE or unigram vocabulary of a corpus.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/core/api.h"

namespace loom::data {

namespace detail {  // the tokenizers' state, private to libloom (not exported)
struct BpeImpl;
struct SentencePieceImpl;
}  // namespace detail

// Byte-level BPE. Encoding: added tokens (special or not) are found first, leftmost-longest, and
// kept whole; the text between them is cut by the pre-tokenizer's regular expressions (Split
// with behavior "Isolated", then ByteLevel's own GPT-2 expression when use_regex), each piece's
// bytes are mapped to GPT-2's byte alphabet and merged by rank. Decoding maps the tokens back to
// bytes, so decode(encode(x)) == x for every byte string x (added tokens decode to their text).
//
// Text that is not UTF-8 (a rule of Loom's: Python's str, which `tokenizers` takes, cannot hold
// it): a byte that starts no well-formed UTF-8 sequence is a piece of its own, and the valid
// text either side of it is pre-tokenized separately. Nothing is dropped or replaced, and
// decode(encode(x)) == x holds for such x too.
//
// Thread-safe: encode and decode are const and may run concurrently (the cache of pieces
// already merged is shared under a lock and bounded).
class LOOM_API BpeTokenizer {
 public:
  // Reads a tokenizer.json. Throws IOError for an unreadable file and ValueError naming the
  // field for a form this reader does not take (a normalizer, a pre-tokenizer other than
  // ByteLevel or Sequence[Split..., ByteLevel], a model other than BPE, BPE dropout, ...).
  static BpeTokenizer load(const std::string& path);
  // The same from the file's text; `origin` names it in errors.
  static BpeTokenizer from_json(std::string_view json_text, const std::string& origin = "tokenizer.json");

  // The ids of `text`. With add_special_tokens the post-processor's template is applied (Llama
  // 3's <|begin_of_text|>), as tokenizers' encode(text) does by default.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The bytes of `ids`; throws IndexError for an id outside [0, vocab_size()) that names no token.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // the largest id + 1, added tokens included
  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string& id_to_token(int32_t id) const;  // as written in tokenizer.json
  // GPT-2's byte alphabet (bytes_to_unicode), in which a byte-level vocabulary spells its
  // tokens: the character, as UTF-8, standing for `byte` ("!" for '!', "Ġ" for ' ').
  static std::string byte_char(uint8_t byte);


 private:
  explicit BpeTokenizer(std::shared_ptr<const detail::BpeImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const detail::BpeImpl> impl_;
};

// A SentencePiece model (`tokenizer.model`, as Llama 2 ships it; BPE or unigram) through Debian's
// libsentencepiece: the ids and text of sentencepiece's Python SentencePieceProcessor(model).
// encode and decode take any bytes (sentencepiece's own rules: its normalizer maps text, and a
// byte that is not UTF-8 becomes U+FFFD, or its <0xNN> piece where the model has byte_fallback).
// Loaded in a module of its own (libloom_sentencepiece.so, beside libloom.so; docs/text.md says
// why); a build with AddressSanitizer cannot open it (SentencePieceTokenizer::available()).
class LOOM_API SentencePieceTokenizer {
 public:
  // Reads a .model file; throws IOError for an unreadable file, ValueError for one sentencepiece
  // refuses (its message), and Error when the module cannot be opened.
  static SentencePieceTokenizer load(const std::string& path);
  static SentencePieceTokenizer from_bytes(std::string_view model_bytes, const std::string& origin = "model");
  // Whether libloom_sentencepiece.so opens here; when not, `why` says what failed.
  static bool available(std::string* why = nullptr);

  // The ids of `text`, with bos_id() before and eos_id() after when asked (and the model has them).
  std::vector<int32_t> encode(std::string_view text, bool add_bos = false, bool add_eos = false) const;
  std::string decode(const std::vector<int32_t>& ids) const;  // IndexError for an id outside [0, vocab_size())

  int64_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view piece) const;  // nullopt when not a piece
  const std::string& id_to_token(int32_t id) const;
  int32_t unk_id() const;
  int32_t bos_id() const;  // -1 when the model has none
  int32_t eos_id() const;
  int32_t pad_id() const;


 private:
  explicit SentencePieceTokenizer(std::shared_ptr<const detail::SentencePieceImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const detail::SentencePieceImpl> impl_;
};

// What train_sentencepiece does with a corpus (sentencepiece's trainer flags of the same names).
struct LOOM_API SentencePieceTrainOptions {
  std::string model_type = "unigram";  // "unigram", "bpe", "char" or "word"
  int64_t vocab_size = 8000;
  double character_coverage = 0.9995;
  bool byte_fallback = false;        // bytes of unseen characters as <0xNN> pieces (Llama 2 has it)
  int64_t max_sentence_length = 4192;  // longer lines are skipped, as sentencepiece does
  int64_t num_threads = 1;
  // Any other flag of sentencepiece's trainer by name ("user_defined_symbols", "split_digits",
  // ...), given as text; it overrides the fields above.
  std::vector<std::pair<std::string, std::string>> extra;
};

// Trains a SentencePiece model on the lines of `corpus_path` and writes it to `model_path`
// (atomically): a file sentencepiece and SentencePieceTokenizer::load read. Throws ValueError with
// the trainer's message when it refuses (a vocab_size the corpus cannot fill, an unknown flag).
LOOM_API void train_sentencepiece(const std::string& corpus_path, const std::string& model_path,
                                  const SentencePieceTrainOptions& options = {});

}  // namespace loom::data
