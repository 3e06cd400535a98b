// Byte-level BPE (loom/data/tokenizer.h): GPT-2's byte alphabet, the pre-tokenizer's
// expressions and the encoder; reading tokenizer.json is tokenizer_json.cpp's.
#include "loom/data/tokenizer.h"

#include <algorithm>
#include <queue>

#include "core/utf8.h"
#include "data/bpe.h"
#include "loom/core/error.h"

namespace loom::data {

namespace {

// Pieces longer than this are merged every time rather than cached: the cache holds the short,
// frequent words, and a hostile text of long pieces cannot grow it past kCacheEntries.
constexpr size_t kCacheMaxPiece = 64;
constexpr size_t kCacheEntries = 1 << 17;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
// take the code points from U+0100 up, so that every byte is a visible character.
std::array<uint32_t, 256> byte_code_points() {
  std::array<uint32_t, 256> cp{};
  std::array<bool, 256> direct{};
  for (int b = 0; b < 256; ++b) direct[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) cp[b] = direct[b] ? static_cast<uint32_t>(b) : next++;
  return cp;
}

std::string map_bytes(std::string_view piece) {
  std::string out;
  out.reserve(piece.size() * 2);
  for (unsigned char c : piece) detail::append_utf8(out, detail::byte_cp()[c]);
  return out;
}

}  // namespace

namespace detail {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

const std::array<uint32_t, 256>& byte_cp() {
  static const std::array<uint32_t, 256> t = byte_code_points();
  return t;
}

std::string unmap_token(std::string_view token) {
  static const std::unordered_map<uint32_t, unsigned char> inverse = [] {
    std::unordered_map<uint32_t, unsigned char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_cp()[b], static_cast<unsigned char>(b));
    return m;
  }();
  std::string out;
  size_t i = 0;
  while (i < token.size()) {
    const size_t n = loom::detail::utf8_sequence_length(token, i);
    if (n == 0) {
      out += token[i++];
      continue;
    }
    const auto* u = reinterpret_cast<const unsigned char*>(token.data() + i);
    uint32_t cp = n == 1 ? u[0] : n == 2 ? ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3Fu)
                                 : n == 3 ? ((u[0] & 0x0Fu) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3Fu)
                                          : ((u[0] & 0x07u) << 18) | ((u[1] & 0x3Fu) << 12) | ((u[2] & 0x3Fu) << 6) | (u[3] & 0x3Fu);
    auto it = inverse.find(cp);
    if (it != inverse.end())
      out += static_cast<char>(it->second);
    else
      out.append(token.substr(i, n));
    i += n;
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE at = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
  if (!code_) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw ValueError(where + ": the regular expression " + loom::detail::quote_text(pattern) + " does not compile (PCRE2, at offset " +
                     std::to_string(at) + ": " + reinterpret_cast<const char*>(msg) + ")");
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(code_); }

bool Regex::find(std::string_view s, size_t from, size_t& begin, size_t& end) const {
  struct State {
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    // Backtracking over a long run of spaces (\s+(?!\S)) needs more than the JIT's default
    // 32 KiB stack; 8 MiB, grown from 64 KiB as needed, is enough for runs of millions.
    pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
    State() { pcre2_jit_stack_assign(ctx, nullptr, stack); }
    ~State() {
      pcre2_match_context_free(ctx);
      pcre2_jit_stack_free(stack);
      pcre2_match_data_free(md);
    }
  };
  thread_local State st;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  const int rc = jit_ ? pcre2_jit_match(code_, subject, s.size(), from, 0, st.md, st.ctx)
                      : pcre2_match(code_, subject, s.size(), from, PCRE2_NO_UTF_CHECK, st.md, st.ctx);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    throw ValueError("BpeTokenizer: matching " + loom::detail::quote_text(pattern_) + " failed (PCRE2: " +
                     reinterpret_cast<const char*>(msg) + ") on a text of " + std::to_string(s.size()) + " bytes");
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
  begin = ov[0];
  end = ov[1];
  return true;
}

}  // namespace detail

int64_t BpeTokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->vocab.find(token);
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

const std::string& BpeTokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(impl_->tokens.size()) || !impl_->has_token[id])
    throw IndexError("BpeTokenizer::id_to_token: id " + std::to_string(id) + " names no token (valid: ids in [0, " +
                     std::to_string(impl_->tokens.size()) + ") that the vocabulary holds)");
  return impl_->tokens[id];
}

std::string BpeTokenizer::byte_char(uint8_t byte) {
  std::string out;
  detail::append_utf8(out, detail::byte_cp()[byte]);
  return out;
}

// Merges by rank, lowest first and leftmost among equals (as tokenizers' Word::merge_all): a
// linked list of symbols and a heap of candidate pairs, each checked when popped against the
// symbols it was made from. O(n log n) however long the piece.
void detail::BpeImpl::merge(std::vector<int32_t>& syms) const {
  const int n = static_cast<int>(syms.size());
  if (n < 2) return;
  struct Cand {
    int32_t rank, pos, left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<int> next, prev;
  thread_local std::vector<Cand> heap_store;
  next.assign(n, 0);
  prev.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  heap_store.clear();
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap(std::greater<>{}, std::move(heap_store));
  auto consider = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(syms[i])) << 32) | static_cast<uint32_t>(syms[next[i]]);
    auto it = merges.find(key);
    if (it != merges.end()) heap.push({it->second.first, i, syms[i], syms[next[i]]});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int j = next[c.pos];
    if (syms[c.pos] != c.left || j < 0 || syms[j] != c.right) continue;  // stale
    syms[c.pos] = merges.find((static_cast<uint64_t>(static_cast<uint32_t>(c.left)) << 32) | static_cast<uint32_t>(c.right))->second.second;
    syms[j] = -1;  // gone
    next[c.pos] = next[j];
    if (next[j] >= 0) prev[next[j]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  int w = 0;
  for (int i = 0; i < n; ++i)
    if (syms[i] != -1) syms[w++] = syms[i];
  syms.resize(w);
}

void detail::BpeImpl::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  const bool cacheable = piece.size() <= kCacheMaxPiece;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<int32_t> syms;
  syms.clear();
  bool done = false;
  if (ignore_merges) {
    auto it = vocab.find(map_bytes(piece));
    if (it != vocab.end()) {
      syms.push_back(it->second);
      done = true;
    }
  }
  if (!done) {
    bool last_unk = false;
    for (unsigned char c : piece) {
      const int32_t id = byte_id[c];
      if (id >= 0) {
        syms.push_back(id);
        last_unk = false;
      } else if (unk) {  // a byte the vocabulary lacks: <unk>, or nothing when there is none (as tokenizers)
        if (!(fuse_unk && last_unk)) syms.push_back(*unk);
        last_unk = true;
      }
    }
    merge(syms);
  }
  out.insert(out.end(), syms.begin(), syms.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() < kCacheEntries) cache.emplace(std::string(piece), syms);
  }
}

// Step k of the pre-tokenizer on a piece: a Split keeps each match and each gap between matches
// as pieces (behavior "Isolated"); after the Splits, ByteLevel's expression when it has one.
void detail::BpeImpl::split_step(size_t step, std::string_view piece, std::vector<int32_t>& out) const {
  const Regex* re = step < splits.size() ? splits[step].get() : step == splits.size() ? byte_level.get() : nullptr;
  if (step > splits.size() || (step == splits.size() && !re)) return bpe(piece, out);
  if (!re) return split_step(step + 1, piece, out);
  size_t pos = 0, from = 0;
  while (from <= piece.size()) {
    size_t b = 0, e = 0;
    if (!re->find(piece, from, b, e)) break;
    if (e == b) {  // an empty match: no piece; look again one character on
      if (b >= piece.size()) break;
      const size_t len = loom::detail::utf8_sequence_length(piece, b);
      from = b + (len ? len : 1);
      continue;
    }
    if (b > pos) split_step(step + 1, piece.substr(pos, b - pos), out);
    split_step(step + 1, piece.substr(b, e - b), out);
    pos = from = e;
  }
  if (pos < piece.size()) split_step(step + 1, piece.substr(pos), out);
}

// Text between added tokens: valid UTF-8 runs are pre-tokenized, each byte that starts no
// well-formed sequence is a piece of its own (the rule in tokenizer.h).
void detail::BpeImpl::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  std::string prefixed;
  if (add_prefix_space && !text.empty() && text[0] != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed += ' ';
    prefixed.append(text);
    text = prefixed;
  }
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size()) {
      const unsigned char c = static_cast<unsigned char>(text[j]);
      if (c < 0x80) {
        ++j;
        continue;
      }
      const size_t len = loom::detail::utf8_sequence_length(text, j);
      if (len == 0) break;
      j += len;
    }
    if (j > i) split_step(0, text.substr(i, j - i), out);
    if (j < text.size()) bpe(text.substr(j, 1), out);
    i = j + 1;
  }
}

void detail::BpeImpl::split_added(size_t set, std::string_view text, std::vector<int32_t>& out) const {
  if (set == added.size()) return encode_segment(text, out);
  const auto& tokens = added[set];
  if (tokens.empty()) return split_added(set + 1, text, out);
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const AddedToken* hit = nullptr;
    for (const AddedToken& a : tokens)  // longest first: the first that matches is the longest
      if (a.content[0] == text[i] && text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) continue;
    if (i > start) split_added(set + 1, text.substr(start, i - start), out);
    out.push_back(hit->id);
    i += hit->content.size() - 1;
    start = i + 1;
  }
  if (start < text.size()) split_added(set + 1, text.substr(start), out);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens) out.insert(out.end(), impl_->prefix.begin(), impl_->prefix.end());
  impl_->split_added(0, text, out);
  if (add_special_tokens) out.insert(out.end(), impl_->suffix.begin(), impl_->suffix.end());
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(impl_->tokens.size()) || !impl_->has_token[id])
      throw IndexError("BpeTokenizer::decode: id " + std::to_string(id) + " names no token (valid: ids in [0, " +
                       std::to_string(impl_->tokens.size()) + ") that the vocabulary holds)");
    if (skip_special_tokens && impl_->is_special[id]) continue;
    out += impl_->token_bytes[id];
  }
  return out;
}

}  // namespace loom::data
