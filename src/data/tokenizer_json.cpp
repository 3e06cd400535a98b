// BpeTokenizer::from_json: a Hugging Face tokenizer.json read into the tokenizer's tables
// (data/bpe.h) in named steps (the model's options, vocabulary, merges, added tokens, then the
// pre-tokenizer, decoder and post-processor), each refusing what byte-level BPE cannot honour.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>

#include "core/json_util.h"
#include "core/utf8.h"
#include "data/bpe.h"
#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/data/tokenizer.h"

namespace loom::data {

using nlohmann::json;
using detail::AddedToken;
using detail::Regex;
using detail::kGpt2Pattern;

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
  t.token_bytes[id] = added ? token : detail::unmap_token(token);
  t.is_special[id] = special;
  t.has_token[id] = 1;
}

// Settings byte-level BPE does not honour, refused rather than ignored: truncation, padding, a
// normalizer.
void refuse_unsupported_settings(const json& root, detail::BpeImpl& t) {
  for (const char* key : {"truncation", "padding"})
    if (root.contains(key) && !root.at(key).is_null()) t.fail(std::string(key) + " is set; it is not supported (valid: null)");
  if (root.contains("normalizer") && !root.at("normalizer").is_null())
    t.fail("normalizer \"" + type_of(root.at("normalizer")) + "\" is not supported (valid: null, as byte-level BPE has)");
}

// The model's kind and options: BPE without dropout, subword affixes or byte fallback.
void read_model_options(const json& model, detail::BpeImpl& t) {
  if (type_of(model) != "BPE" && !(type_of(model) == "(no type)" && model.contains("merges")))
    t.fail("model \"" + type_of(model) + "\" is not supported (valid: BPE)");
  if (model.contains("dropout") && !model.at("dropout").is_null())
    t.fail("model.dropout is set; BPE dropout is not supported (valid: null)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model.at(key).is_null() && !(model.at(key).is_string() && model.at(key).get<std::string>().empty()))
      t.fail(std::string("model.") + key + " is set; it is not supported with byte-level BPE (valid: null)");
  if (get_bool(model, "byte_fallback", false, "model", t))
    t.fail("model.byte_fallback true is not supported (valid: false: byte-level BPE has every byte already)");
  t.fuse_unk = get_bool(model, "fuse_unk", false, "model", t);
  t.ignore_merges = get_bool(model, "ignore_merges", false, "model", t);
}

// Token ids index tables, so they must be dense enough: a file naming id 2^31 - 1 for a
// vocabulary of ten tokens would otherwise allocate gigabytes.
class IdReader {
 public:
  IdReader(size_t tokens, detail::BpeImpl& t) : max_id_(static_cast<int64_t>(tokens) * 2 + 1024), t_(t) {}
  int32_t operator()(const json& j, const std::string& what) const {
    auto v = loom::detail::json_to_int(j, 0, std::min<int64_t>(max_id_, INT32_MAX));
    if (!v)
      t_.fail(what + " has id " + j.dump() + "; valid: an integer in [0, " + std::to_string(max_id_) +
              "] (at most twice the number of tokens + 1024)");
    return static_cast<int32_t>(*v);
  }

 private:
  int64_t max_id_;
  detail::BpeImpl& t_;
};

// model.vocab and model.unk_token, then each byte's token (the byte alphabet's character).
void read_vocab(const json& model, const json& vocab, const IdReader& read_id, detail::BpeImpl& t) {
  for (const auto& [token, idj] : vocab.items()) {
    const int32_t id = read_id(idj, "model.vocab entry " + loom::detail::quote_text(token));
    t.vocab[token] = id;
    set_token(t, id, token, false, false);
  }
  if (model.contains("unk_token") && model.at("unk_token").is_string()) {
    auto it = t.vocab.find(model.at("unk_token").get<std::string>());
    if (it == t.vocab.end()) t.fail("model.unk_token " + model.at("unk_token").dump() + " is not in model.vocab");
    t.unk = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    detail::append_utf8(ch, detail::byte_cp()[b]);
    auto it = t.vocab.find(ch);
    t.byte_id[b] = it == t.vocab.end() ? -1 : it->second;
  }
}

// model.merges ("a b" or ["a", "b"]), ranked in order, each of tokens of the vocabulary.
void read_merges(const json& model, detail::BpeImpl& t) {
  const json& merges = need(model, "merges", "model", t);
  if (!merges.is_array()) t.fail("model.merges must be a list");
  int32_t rank = 0;
  for (const json& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        t.fail("model.merges[" + std::to_string(rank) + "] " + loom::detail::quote_text(s) + " is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      t.fail("model.merges[" + std::to_string(rank) + "] must be \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = t.vocab.find(a), ib = t.vocab.find(b), ic = t.vocab.find(a + b);
    if (ia == t.vocab.end() || ib == t.vocab.end() || ic == t.vocab.end())
      t.fail("model.merges[" + std::to_string(rank) + "] (" + loom::detail::quote_text(a) + ", " + loom::detail::quote_text(b) +
             ") names a token that is not in model.vocab");
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) | static_cast<uint32_t>(ib->second);
    // a pair listed twice takes its last rank, as tokenizers' map of merges (built in order) does
    t.merges.insert_or_assign(key, std::make_pair(rank, ic->second));
    ++rank;
  }
}

// added_tokens: each matched on the text before BPE (the raw or the "normalized" set), longest first.
void read_added_tokens(const json& added_json, const IdReader& read_id, detail::BpeImpl& t) {
  for (const json& a : added_json) {
    if (!a.is_object() || !a.contains("content") || !a.at("content").is_string() || !a.contains("id"))
      t.fail("added_tokens: an entry without \"id\" and a string \"content\"");
    const std::string content = a.at("content").get<std::string>();
    if (content.empty()) t.fail("added_tokens: an empty content");
    for (const char* key : {"single_word", "lstrip", "rstrip"})
      if (get_bool(a, key, false, "added_tokens " + loom::detail::quote_text(content), t))
        t.fail("added_tokens " + loom::detail::quote_text(content) + ": " + key + " true is not supported (valid: false)");
    const int32_t id = read_id(a.at("id"), "added_tokens " + loom::detail::quote_text(content));
    const bool special = get_bool(a, "special", false, "added_tokens", t);
    const bool normalized = get_bool(a, "normalized", !special, "added_tokens", t);
    t.added[normalized ? 1 : 0].push_back({content, id, special});
    t.vocab[content] = id;
    set_token(t, id, content, special, true);
  }
  for (auto& set : t.added)
    std::stable_sort(set.begin(), set.end(), [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
}

// The pre-tokenizer (required: byte-level BPE needs ByteLevel), the decoder and the
// post-processor, whose template must name tokens of the vocabulary.
void read_pipeline(const json& root, detail::BpeImpl& t) {
  if (!root.contains("pre_tokenizer") || root.at("pre_tokenizer").is_null())
    t.fail("pre_tokenizer is null; byte-level BPE needs ByteLevel (valid: ByteLevel, Sequence[Split..., ByteLevel])");
  parse_pre_tokenizer(root.at("pre_tokenizer"), t);
  if (root.contains("decoder") && !root.at("decoder").is_null() && type_of(root.at("decoder")) != "ByteLevel")
    t.fail("decoder \"" + type_of(root.at("decoder")) + "\" is not supported (valid: ByteLevel)");
  if (root.contains("post_processor")) parse_post_processor(root.at("post_processor"), t);
  for (const std::vector<int32_t>* ids : {&t.prefix, &t.suffix})
    for (int32_t id : *ids)
      if (id >= static_cast<int32_t>(t.tokens.size()) || !t.has_token[id])
        t.fail("post_processor names id " + std::to_string(id) + ", which is no token");
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(std::string_view text, const std::string& origin) {
  auto t = std::make_shared<detail::BpeImpl>();
  t->origin = origin;
  std::string err;
  auto parsed = loom::detail::parse_json(text, &err);
  if (!parsed || !parsed->is_object()) t->fail("not a tokenizer.json (" + (parsed ? std::string("not an object") : err) + ")");
  const json& root = *parsed;
  refuse_unsupported_settings(root, *t);
  const json& model = need(root, "model", "tokenizer.json", *t);
  read_model_options(model, *t);
  const json& vocab = need(model, "vocab", "model", *t);
  if (!vocab.is_object()) t->fail("model.vocab must be an object of token: id");
  const json added_json = root.contains("added_tokens") ? root.at("added_tokens") : json::array();
  if (!added_json.is_array()) t->fail("added_tokens must be a list");
  const IdReader read_id(vocab.size() + added_json.size(), *t);
  read_vocab(model, vocab, read_id, *t);
  read_merges(model, *t);
  read_added_tokens(added_json, read_id, *t);
  read_pipeline(root, *t);
  return BpeTokenizer(std::move(t));
}

BpeTokenizer BpeTokenizer::load(const std::string& path) { return from_json(read_file(path), "'" + path + "'"); }

}  // namespace loom::data
