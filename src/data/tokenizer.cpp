#include "loom/data/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <climits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/core/error.h"
#include "loom/core/file.h"

namespace loom::data {

namespace {

using nlohmann::json;

// GPT-2's ByteLevel pre-tokenizer expression, as tokenizers hard-codes it.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Pieces longer than this are merged every time rather than cached: the cache holds the short,
// frequent words, and a hostile text of long pieces cannot grow it past kCacheEntries.
constexpr size_t kCacheMaxPiece = 64;
constexpr size_t kCacheEntries = 1 << 17;

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

const std::array<uint32_t, 256>& byte_cp() {
  static const std::array<uint32_t, 256> t = byte_code_points();
  return t;
}

std::string map_bytes(std::string_view piece) {
  std::string out;
  out.reserve(piece.size() * 2);
  for (unsigned char c : piece) append_utf8(out, byte_cp()[c]);
  return out;
}

// A token's text back to bytes: each character of the byte alphabet gives its byte; any other
// character (in an added token) is kept as its UTF-8.
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

// A compiled expression (UTF, Unicode properties, JIT when the machine has it). Matching state
// is per thread (below), so one Regex serves concurrent encodes.
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
    int err = 0;
    PCRE2_SIZE at = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err, &at,
                          nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw ValueError(where + ": the regular expression " + loom::detail::quote_text(pattern) +
                       " does not compile (PCRE2, at offset " + std::to_string(at) + ": " +
                       reinterpret_cast<const char*>(msg) + ")");
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The first match in s[from:], as [begin, end); false when there is none. `s` is valid UTF-8.
  bool find(std::string_view s, size_t from, size_t& begin, size_t& end) const {
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

}  // namespace

struct detail::BpeImpl {
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

namespace {

const json& need(const json& j, const char* key, const std::string& where, const detail::BpeImpl& t) {
  if (!j.is_object() || !j.contains(key)) t.fail(where + " has no \"" + key + "\"");
  return j.at(key);
}

bool get_bool(const json& j, const char* key, bool dflt, const std::string& where, const detail::BpeImpl& t) {
  if (!j.contains(key) || j.at(key).is_null()) return dflt;
  if (!j.at(key).is_boolean()) t.fail(where + "." + key + " must be true or false");
  return j.at(key).get<bool>();
}

std::string type_of(const json& j) {
  if (j.is_object() && j.contains("type") && j.at("type").is_string()) return j.at("type").get<std::string>();
  return "(no type)";
}

void parse_post_processor(const json& p, detail::BpeImpl& t) {
  if (p.is_null()) return;
  const std::string type = type_of(p);
  if (type == "ByteLevel") return;  // trims offsets only: the ids are unchanged
  if (type == "Sequence") {
    const json& ps = need(p, "processors", "post_processor", t);
    if (!ps.is_array()) t.fail("post_processor.processors must be a list");
    for (const json& q : ps) parse_post_processor(q, t);
    return;
  }
  if (type != "TemplateProcessing")
    t.fail("post_processor \"" + type + "\" is not supported (valid: null, ByteLevel, TemplateProcessing, Sequence of them)");
  const json& single = need(p, "single", "post_processor", t);
  const json& specials = p.contains("special_tokens") ? p.at("special_tokens") : json::object();
  if (!single.is_array()) t.fail("post_processor.single must be a list");
  bool seen_sequence = false;
  for (const json& item : single) {
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_sequence) t.fail("post_processor.single holds the sequence twice");
      seen_sequence = true;
    } else if (item.is_object() && item.contains("SpecialToken")) {
      const json& st = item.at("SpecialToken");
      if (!st.is_object() || !st.contains("id") || !st.at("id").is_string())
        t.fail("post_processor.single: a SpecialToken without a string \"id\"");
      const std::string name = st.at("id").get<std::string>();
      if (!specials.is_object() || !specials.contains(name) || !specials.at(name).contains("ids") ||
          !specials.at(name).at("ids").is_array())
        t.fail("post_processor: the special token \"" + name + "\" is not in special_tokens with its ids");
      for (const json& id : specials.at(name).at("ids")) {
        auto v = loom::detail::json_to_int(id, 0, INT32_MAX);
        if (!v) t.fail("post_processor: special token \"" + name + "\" has an id that is not an integer in [0, 2^31)");
        (seen_sequence ? t.suffix : t.prefix).push_back(static_cast<int32_t>(*v));
      }
    } else {
      t.fail("post_processor.single: an item that is neither Sequence nor SpecialToken");
    }
  }
  if (!seen_sequence) t.fail("post_processor.single has no Sequence item");
}

void parse_byte_level(const json& p, bool alone, detail::BpeImpl& t) {
  t.add_prefix_space = get_bool(p, "add_prefix_space", true, "pre_tokenizer(ByteLevel)", t);
  if (t.add_prefix_space && !alone)
    t.fail("pre_tokenizer: ByteLevel with add_prefix_space after a Split is not supported (valid: add_prefix_space "
           "false, or ByteLevel alone)");
  if (get_bool(p, "use_regex", true, "pre_tokenizer(ByteLevel)", t))
    t.byte_level = std::make_unique<Regex>(kGpt2Pattern, "BpeTokenizer");
}

void parse_split(const json& p, detail::BpeImpl& t) {
  const json& pattern = need(p, "pattern", "pre_tokenizer(Split)", t);
  std::string re;
  if (pattern.is_object() && pattern.contains("Regex") && pattern.at("Regex").is_string()) {
    re = pattern.at("Regex").get<std::string>();
  } else if (pattern.is_object() && pattern.contains("String") && pattern.at("String").is_string()) {
    re = "\\Q" + pattern.at("String").get<std::string>() + "\\E";  // a literal
    if (pattern.at("String").get<std::string>().find("\\E") != std::string::npos)
      t.fail("pre_tokenizer(Split): a String pattern holding \"\\E\" is not supported");
  } else {
    t.fail("pre_tokenizer(Split).pattern must be {\"Regex\": ...} or {\"String\": ...}");
  }
  const json& behavior = need(p, "behavior", "pre_tokenizer(Split)", t);
  if (!behavior.is_string() || behavior.get<std::string>() != "Isolated")
    t.fail("pre_tokenizer(Split): behavior " + behavior.dump() + " is not supported (valid: \"Isolated\")");
  if (get_bool(p, "invert", false, "pre_tokenizer(Split)", t))
    t.fail("pre_tokenizer(Split): invert true is not supported (valid: false)");
  t.splits.push_back(std::make_unique<Regex>(re, "BpeTokenizer: " + t.origin + ": pre_tokenizer(Split)"));
}

void parse_pre_tokenizer(const json& p, detail::BpeImpl& t) {
  const std::string type = type_of(p);
  if (type == "ByteLevel") return parse_byte_level(p, true, t);
  if (type == "Sequence") {
    const json& ps = need(p, "pretokenizers", "pre_tokenizer", t);
    if (!ps.is_array() || ps.empty() || type_of(ps.back()) != "ByteLevel")
      t.fail("pre_tokenizer: a Sequence must end with ByteLevel (valid: Sequence[Split..., ByteLevel])");
    for (size_t i = 0; i + 1 < ps.size(); ++i) {
      if (type_of(ps[i]) != "Split")
        t.fail("pre_tokenizer \"" + type_of(ps[i]) + "\" in a Sequence is not supported (valid: Split, then ByteLevel last)");
      parse_split(ps[i], t);
    }
    return parse_byte_level(ps.back(), ps.size() == 1, t);
  }
  t.fail("pre_tokenizer \"" + type + "\" is not supported (valid: ByteLevel, Sequence[Split..., ByteLevel])");
}

void set_token(detail::BpeImpl& t, int32_t id, const std::string& token, bool special, bool added) {
  if (id >= static_cast<int32_t>(t.tokens.size())) {
    t.tokens.resize(id + 1);
    t.token_bytes.resize(id + 1);
    t.is_special.resize(id + 1, 0);
    t.has_token.resize(id + 1, 0);
  }
  t.tokens[id] = token;
  t.token_bytes[id] = added ? token : unmap_token(token);
  t.is_special[id] = special;
  t.has_token[id] = 1;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(std::string_view text, const std::string& origin) {
  auto t = std::make_shared<detail::BpeImpl>();
  t->origin = origin;
  std::string err;
  auto parsed = loom::detail::parse_json(text, &err);
  if (!parsed || !parsed->is_object()) t->fail("not a tokenizer.json (" + (parsed ? std::string("not an object") : err) + ")");
  const json& root = *parsed;

  for (const char* key : {"truncation", "padding"})
    if (root.contains(key) && !root.at(key).is_null())
      t->fail(std::string(key) + " is set; it is not supported (valid: null)");
  if (root.contains("normalizer") && !root.at("normalizer").is_null())
    t->fail("normalizer \"" + type_of(root.at("normalizer")) + "\" is not supported (valid: null, as byte-level BPE has)");

  const json& model = need(root, "model", "tokenizer.json", *t);
  if (type_of(model) != "BPE" && !(type_of(model) == "(no type)" && model.contains("merges")))
    t->fail("model \"" + type_of(model) + "\" is not supported (valid: BPE)");
  if (model.contains("dropout") && !model.at("dropout").is_null())
    t->fail("model.dropout is set; BPE dropout is not supported (valid: null)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model.at(key).is_null() && !(model.at(key).is_string() && model.at(key).get<std::string>().empty()))
      t->fail(std::string("model.") + key + " is set; it is not supported with byte-level BPE (valid: null)");
  if (get_bool(model, "byte_fallback", false, "model", *t))
    t->fail("model.byte_fallback true is not supported (valid: false: byte-level BPE has every byte already)");
  t->fuse_unk = get_bool(model, "fuse_unk", false, "model", *t);
  t->ignore_merges = get_bool(model, "ignore_merges", false, "model", *t);

  const json& vocab = need(model, "vocab", "model", *t);
  if (!vocab.is_object()) t->fail("model.vocab must be an object of token: id");
  // Ids index tables, so they must be dense enough: a file naming id 2^31 - 1 for a vocabulary
  // of ten tokens would otherwise allocate gigabytes.
  const json added_json = root.contains("added_tokens") ? root.at("added_tokens") : json::array();
  if (!added_json.is_array()) t->fail("added_tokens must be a list");
  const int64_t max_id = static_cast<int64_t>(vocab.size() + added_json.size()) * 2 + 1024;
  auto read_id = [&](const json& j, const std::string& what) {
    auto v = loom::detail::json_to_int(j, 0, std::min<int64_t>(max_id, INT32_MAX));
    if (!v)
      t->fail(what + " has id " + j.dump() + "; valid: an integer in [0, " + std::to_string(max_id) +
              "] (at most twice the number of tokens + 1024)");
    return static_cast<int32_t>(*v);
  };
  for (const auto& [token, idj] : vocab.items()) {
    const int32_t id = read_id(idj, "model.vocab entry " + loom::detail::quote_text(token));
    t->vocab[token] = id;
    set_token(*t, id, token, false, false);
  }
  if (model.contains("unk_token") && model.at("unk_token").is_string()) {
    auto it = t->vocab.find(model.at("unk_token").get<std::string>());
    if (it == t->vocab.end()) t->fail("model.unk_token " + model.at("unk_token").dump() + " is not in model.vocab");
    t->unk = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, byte_cp()[b]);
    auto it = t->vocab.find(ch);
    t->byte_id[b] = it == t->vocab.end() ? -1 : it->second;
  }

  const json& merges = need(model, "merges", "model", *t);
  if (!merges.is_array()) t->fail("model.merges must be a list");
  int32_t rank = 0;
  for (const json& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        t->fail("model.merges[" + std::to_string(rank) + "] " + loom::detail::quote_text(s) + " is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      t->fail("model.merges[" + std::to_string(rank) + "] must be \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = t->vocab.find(a), ib = t->vocab.find(b), ic = t->vocab.find(a + b);
    if (ia == t->vocab.end() || ib == t->vocab.end() || ic == t->vocab.end())
      t->fail("model.merges[" + std::to_string(rank) + "] (" + loom::detail::quote_text(a) + ", " + loom::detail::quote_text(b) +
              ") names a token that is not in model.vocab");
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) | static_cast<uint32_t>(ib->second);
    // a pair listed twice takes its last rank, as tokenizers' map of merges (built in order) does
    t->merges.insert_or_assign(key, std::make_pair(rank, ic->second));
    ++rank;
  }

  for (const json& a : added_json) {
    if (!a.is_object() || !a.contains("content") || !a.at("content").is_string() || !a.contains("id"))
      t->fail("added_tokens: an entry without \"id\" and a string \"content\"");
    const std::string content = a.at("content").get<std::string>();
    if (content.empty()) t->fail("added_tokens: an empty content");
    for (const char* key : {"single_word", "lstrip", "rstrip"})
      if (get_bool(a, key, false, "added_tokens " + loom::detail::quote_text(content), *t))
        t->fail("added_tokens " + loom::detail::quote_text(content) + ": " + key + " true is not supported (valid: false)");
    const int32_t id = read_id(a.at("id"), "added_tokens " + loom::detail::quote_text(content));
    const bool special = get_bool(a, "special", false, "added_tokens", *t);
    const bool normalized = get_bool(a, "normalized", !special, "added_tokens", *t);
    t->added[normalized ? 1 : 0].push_back({content, id, special});
    t->vocab[content] = id;
    set_token(*t, id, content, special, true);
  }
  for (auto& set : t->added)
    std::stable_sort(set.begin(), set.end(), [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });

  if (!root.contains("pre_tokenizer") || root.at("pre_tokenizer").is_null())
    t->fail("pre_tokenizer is null; byte-level BPE needs ByteLevel (valid: ByteLevel, Sequence[Split..., ByteLevel])");
  parse_pre_tokenizer(root.at("pre_tokenizer"), *t);
  if (root.contains("decoder") && !root.at("decoder").is_null() && type_of(root.at("decoder")) != "ByteLevel")
    t->fail("decoder \"" + type_of(root.at("decoder")) + "\" is not supported (valid: ByteLevel)");
  if (root.contains("post_processor")) parse_post_processor(root.at("post_processor"), *t);
  for (int32_t id : t->prefix)
    if (id >= static_cast<int32_t>(t->tokens.size()) || !t->has_token[id]) t->fail("post_processor names id " + std::to_string(id) + ", which is no token");
  for (int32_t id : t->suffix)
    if (id >= static_cast<int32_t>(t->tokens.size()) || !t->has_token[id]) t->fail("post_processor names id " + std::to_string(id) + ", which is no token");
  return BpeTokenizer(std::move(t));
}

BpeTokenizer BpeTokenizer::load(const std::string& path) { return from_json(read_file(path), "'" + path + "'"); }

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
