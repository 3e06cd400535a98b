#pragma once
// A byte-level BPE tokenizer.json of GPT-2's form for tests (data's tokenizer tests, the command
// line's `loom generate`): written here, nothing downloaded.
#include <loom/data/tokenizer.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace test_tokenizers {

// GPT-2's byte alphabet: the character standing for byte b (data's, as the tokenizer reads it).
inline std::string byte_char(int b) { return loom::data::BpeTokenizer::byte_char(static_cast<uint8_t>(b)); }

// A byte-level BPE of GPT-2's form: byte b has id b, then the merges' tokens from 256 in rank
// order: h e, l l, he ll, hell o, Ġ w, a a; <|endoftext|> is 300.
inline nlohmann::json tiny_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {byte_char(' '), "w"}, {"a", "a"}};
  nlohmann::json m = nlohmann::json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    m.push_back(a + " " + b);
  }
  return nlohmann::json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", nlohmann::json::array({nlohmann::json{{"id", 300}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
                                                 {"rstrip", false}, {"normalized", false}, {"special", true}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                         {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
                         {"merges", m}}}};
}

}  // namespace test_tokenizers
