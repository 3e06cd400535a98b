#pragma once
// Byte-level BPE's insides (loom/data/tokenizer.h), shared by the reader of tokenizer.json
// (tokenizer_json.cpp) and the encoder (tokenizer.cpp): the tokenizer's tables, its
// pre-tokenizer's expressions and GPT-2's byte alphabet.
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/core/error.h"
#include "loom/data/tokenizer.h"

namespace loom::data::detail {

// GPT-2's ByteLevel pre-tokenizer expression, as tokenizers hard-codes it.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// `cp` as UTF-8, appended to `out`.
void append_utf8(std::string& out, uint32_t cp);
// GPT-2's bytes_to_unicode: each byte's character in the byte alphabet.
const std::array<uint32_t, 256>& byte_cp();
// A token's text back to bytes: each character of the byte alphabet gives its byte; any other
// character (in an added token) is kept as its UTF-8.
std::string unmap_token(std::string_view token);

// A compiled expression (UTF, Unicode properties, JIT when the machine has it). Matching state
// is per thread, so one Regex serves concurrent encodes.
class Regex {
 public:
  // ValueError starting with `where` when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The first match in s[from:], as [begin, end); false when there is none. `s` is valid UTF-8.
  bool find(std::string_view s, size_t from, size_t& begin, size_t& end) const;

 private:
  std::string pattern_;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct AddedToken {
  std::string content;
  int32_t id;
  bool special;
};

// A tokenizer's tables, read once (tokenizer_json.cpp) and then only read by encodes, which may
// run concurrently: the merge cache is the one thing they write, under its mutex.
struct BpeImpl {
  std::string origin;
  // model
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab;  // model and added tokens
  std::vector<std::string> tokens;                                              // by id ("" where none)
  std::vector<std::string> token_bytes;                                         // decoded bytes by id
  std::vector<char> is_special;
  std::vector<char> has_token;
  std::array<int32_t, 256> byte_id{};  // -1 where the byte's character is not in the vocabulary
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (left, right) -> (rank, merged)
  std::optional<int32_t> unk;
  bool fuse_unk = false;
  bool ignore_merges = false;
  // added tokens: those matched on the raw text first, then the "normalized" ones (with no
  // normalizer the text is the same), each set leftmost-longest, as tokenizers' AddedVocabulary
  std::array<std::vector<AddedToken>, 2> added;  // each sorted longest first
  // pre-tokenizer: Split expressions in order, then ByteLevel
  std::vector<std::unique_ptr<Regex>> splits;
  std::unique_ptr<Regex> byte_level;  // GPT-2's expression when ByteLevel's use_regex
  bool add_prefix_space = false;
  // post-processor template (add_special_tokens)
  std::vector<int32_t> prefix, suffix;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;

  [[noreturn]] void fail(const std::string& what) const { throw ValueError("BpeTokenizer: " + origin + ": " + what); }

  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
  void split_step(size_t step, std::string_view piece, std::vector<int32_t>& out) const;
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;
  void merge(std::vector<int32_t>& syms) const;
  void split_added(size_t set, std::string_view text, std::vector<int32_t>& out) const;
};

}  // namespace loom::data::detail
