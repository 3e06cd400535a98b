// Tokenizers (loom/data/tokenizer.h) and token windows (loom/data/text.h). The equality of every
// id with PyPI tokenizers and sentencepiece on a 1.3 MB corpus is the ctest
// text_tokenizers_python (tests/text/); these are the rules, the errors and the edge cases.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/data/loader.h"
#include "loom/data/text.h"
#include "loom/data/tokenizer.h"
#include "loom/ops/creation.h"
#include "unit/data/tiny_bpe.h"

using namespace loom;
using loom::data::BpeTokenizer;
using nlohmann::json;

namespace {

using test_tokenizers::byte_char;
using test_tokenizers::tiny_json;

BpeTokenizer tiny() { return BpeTokenizer::from_json(tiny_json().dump()); }

std::vector<int32_t> ids(std::initializer_list<int32_t> v) { return v; }

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_tok_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST(BpeTokenizer, MergesByRankLeftmostFirst) {
  const BpeTokenizer t = tiny();
  EXPECT_EQ(t.encode("hello"), ids({259}));                       // h e, l l, he ll, hell o
  EXPECT_EQ(t.encode("hello world"), ids({259, 260, 'o', 'r', 'l', 'd'}));  // " world": Ġ w
  EXPECT_EQ(t.encode("aaa"), ids({261, 'a'}));                   // the leftmost pair of equal rank
  EXPECT_EQ(t.encode("aaaa"), ids({261, 261}));
  EXPECT_EQ(t.decode(t.encode("hello world")), "hello world");
  EXPECT_EQ(t.vocab_size(), 301);
  EXPECT_EQ(t.token_to_id("hell"), 258);
  EXPECT_EQ(t.id_to_token(260), byte_char(' ') + "w");
  EXPECT_FALSE(t.token_to_id("nope").has_value());
}

TEST(BpeTokenizer, ByteCharIsGpt2sByteAlphabet) {
  // printable Latin-1 stands for itself; the 68 other bytes take U+0100 on, in byte order
  EXPECT_EQ(data::BpeTokenizer::byte_char('!'), "!");
  EXPECT_EQ(data::BpeTokenizer::byte_char(0xE9), "\u00e9");
  EXPECT_EQ(data::BpeTokenizer::byte_char(0), "\u0100");
  EXPECT_EQ(data::BpeTokenizer::byte_char(' '), "\u0120");   // GPT-2's Ġ
  EXPECT_EQ(data::BpeTokenizer::byte_char(0x7F), "\u0121");
  EXPECT_EQ(data::BpeTokenizer::byte_char(0xAD), "\u0143");  // the last one
}

TEST(BpeTokenizer, APairListedTwiceTakesItsLastRank) {
  // as tokenizers' map of merges, built in order: "a b" at ranks 6 and 8, "b c" at 7
  json j = tiny_json();
  j["model"]["vocab"]["ab"] = 262;
  j["model"]["vocab"]["bc"] = 263;
  for (const char* m : {"a b", "b c", "a b"}) j["model"]["merges"].push_back(m);
  EXPECT_EQ(BpeTokenizer::from_json(j.dump()).encode("abc"), ids({'a', 263}));
}

TEST(BpeTokenizer, SpecialTokensAreMatchedBeforePreTokenizing) {
  const BpeTokenizer t = tiny();
  EXPECT_EQ(t.encode("hello<|endoftext|>hello"), ids({259, 300, 259}));
  EXPECT_EQ(t.decode({259, 300, 259}), "hello<|endoftext|>hello");
  EXPECT_EQ(t.decode({259, 300, 259}, /*skip_special_tokens=*/true), "hellohello");
  EXPECT_EQ(t.encode("<|endoftext"), t.encode("<|endoftext"));  // a prefix is ordinary text
  EXPECT_EQ(t.encode("<|endoftext").size(), 11u);
}

TEST(BpeTokenizer, LongPiecesMergeLikeShortOnes) {
  // 5001 a's are one piece of the GPT-2 expression: the heap path must give what pairs of aa give
  const BpeTokenizer t = tiny();
  const auto out = t.encode(std::string(5001, 'a'));
  ASSERT_EQ(out.size(), 2501u);
  for (size_t i = 0; i + 1 < out.size(); ++i) ASSERT_EQ(out[i], 261);
  EXPECT_EQ(out.back(), 'a');
  const std::string spaces = std::string(100000, ' ') + "x";  // \s+(?!\S) backtracking over a long run
  EXPECT_EQ(t.decode(t.encode(spaces)), spaces);
}

TEST(BpeTokenizer, TextThatIsNotUtf8IsEncodedByteByByteAndRoundTrips) {
  const BpeTokenizer t = tiny();
  // the rule: a byte that starts no well-formed sequence is a piece of its own; "ab" would
  // otherwise be one piece (and with a merge "a b", one token)
  EXPECT_EQ(t.encode("a\xff" "b"), ids({'a', 0xff, 'b'}));
  EXPECT_EQ(t.encode("hello\xc3"), ids({259, 0xc3}));  // a sequence cut short
  for (const std::string x : {std::string("\xed\xa0\x80"), std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80"),
                              std::string("a\0b", 3), std::string("\xf0\x9f\x98")}) {
    EXPECT_EQ(t.decode(t.encode(x)), x);
  }
  std::string all;
  for (int i = 0; i < 4096; ++i) all += static_cast<char>((i * 7919) & 0xFF);
  EXPECT_EQ(t.decode(t.encode(all)), all);
}

TEST(BpeTokenizer, EncodesConcurrently) {
  const BpeTokenizer t = tiny();
  const std::string text = "hello world aaa hello<|endoftext|> worlds";
  const auto want = t.encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int r = 0; r < 200; ++r) got[k] = t.encode(text);
    });
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
}

TEST(BpeTokenizer, LlamaThreeFormsAreRead) {
  json j = tiny_json();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         json::array({json{{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,3}|\\p{L}+|\\s+|[^\\s\\p{L}\\p{N}]+"}}},
                                           {"behavior", "Isolated"}, {"invert", false}},
                                      json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({json{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                                                 json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {300}}, {"tokens", {"<|endoftext|>"}}}}}}};
  j["model"]["merges"] = json::array();
  const json base = tiny_json();
  for (const auto& m : base["model"]["merges"]) {  // tokenizers 0.20's form: pairs
    const std::string s = m.get<std::string>();
    j["model"]["merges"].push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  const BpeTokenizer t = BpeTokenizer::from_json(j.dump());
  EXPECT_EQ(t.encode("12345"), ids({300, '1', '2', '3', '4', '5'}));
  EXPECT_EQ(t.encode("hello", /*add_special_tokens=*/false), ids({259}));
  // without GPT-2's expression " w" is not one piece: the space and the word are split
  EXPECT_EQ(t.encode(" wo", false), ids({32, 'w', 'o'}));
}

TEST(BpeTokenizer, RefusesWhatItDoesNotRead) {
  auto refused = [](const std::function<void(json&)>& edit) {
    json j = tiny_json();
    edit(j);
    return error_of<ValueError>([&] { BpeTokenizer::from_json(j.dump()); });
  };
  EXPECT_NE(refused([](json& j) { j["model"]["type"] = "WordPiece"; }).find("model \"WordPiece\" is not supported"), std::string::npos);
  EXPECT_NE(refused([](json& j) { j["normalizer"] = {{"type", "NFC"}}; }).find("normalizer \"NFC\""), std::string::npos);
  EXPECT_NE(refused([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }).find("pre_tokenizer \"Whitespace\""), std::string::npos);
  EXPECT_NE(refused([](json& j) { j["model"]["dropout"] = 0.1; }).find("dropout"), std::string::npos);
  EXPECT_NE(refused([](json& j) { j["model"]["merges"].push_back("zz qq"); }).find("not in model.vocab"), std::string::npos);
  EXPECT_NE(refused([](json& j) { j["model"]["vocab"]["huge"] = 2000000000; }).find("has id 2000000000"), std::string::npos);
  EXPECT_NE(refused([](json& j) {
              j["pre_tokenizer"] = {{"type", "Sequence"},
                                    {"pretokenizers", json::array({json{{"type", "Split"}, {"pattern", {{"Regex", "(("}}},
                                                                        {"behavior", "Isolated"}, {"invert", false}},
                                                                   json{{"type", "ByteLevel"}, {"add_prefix_space", false}}})}};
            }).find("does not compile"),
            std::string::npos);
  EXPECT_NE(refused([](json& j) {
              j["pre_tokenizer"] = {{"type", "Sequence"},
                                    {"pretokenizers", json::array({json{{"type", "Split"}, {"pattern", {{"Regex", "a"}}},
                                                                        {"behavior", "MergedWithPrevious"}, {"invert", false}},
                                                                   json{{"type", "ByteLevel"}, {"add_prefix_space", false}}})}};
            }).find("valid: \"Isolated\""),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] { BpeTokenizer::from_json("{\"model\": "); }).find("not a tokenizer.json"), std::string::npos);
  EXPECT_NE(error_of<IndexError>([] { tiny().decode({5000}); }).find("id 5000 names no token"), std::string::npos);
  EXPECT_NE(error_of<IOError>([] { BpeTokenizer::load("/nonexistent/tokenizer.json"); }).find("/nonexistent/tokenizer.json"), std::string::npos);
}

TEST(BpeTokenizer, HostileFilesFailCleanly) {
  // an expression that backtracks exponentially: PCRE2's match limit ends it with a ValueError
  json j = tiny_json();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({json{{"type", "Split"}, {"pattern", {{"Regex", "(a|aa)+$"}}},
                                                            {"behavior", "Isolated"}, {"invert", false}},
                                                       json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  const BpeTokenizer t = BpeTokenizer::from_json(j.dump());
  const std::string msg = error_of<ValueError>([&] { t.encode(std::string(200, 'a') + "b"); });
  EXPECT_NE(msg.find("PCRE2"), std::string::npos) << msg;
  // nesting far deeper than any tokenizer.json: refused before a DOM is built
  EXPECT_NE(error_of<ValueError>([] { BpeTokenizer::from_json(std::string(100000, '[')); }).find("not a tokenizer.json"),
            std::string::npos);
  json k = tiny_json();
  k["model"]["vocab"]["neg"] = -1;
  EXPECT_NE(error_of<ValueError>([&] { BpeTokenizer::from_json(k.dump()); }).find("has id -1"), std::string::npos);
  json m = tiny_json();
  m["model"]["merges"].push_back(7);
  EXPECT_NE(error_of<ValueError>([&] { BpeTokenizer::from_json(m.dump()); }).find("must be \"a b\" or [\"a\", \"b\"]"),
            std::string::npos);
  json a = tiny_json();
  a["added_tokens"].push_back(json{{"id", 301}, {"content", ""}});
  EXPECT_NE(error_of<ValueError>([&] { BpeTokenizer::from_json(a.dump()); }).find("an empty content"), std::string::npos);
}

TEST(SentencePieceTokenizer, TrainsLoadsEncodesAndDecodes) {
  std::string why;
  if (!data::SentencePieceTokenizer::available(&why)) GTEST_SKIP() << why;
  const std::string corpus = temp_path("corpus.txt"), model = temp_path("m.model");
  std::string text;
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "naïve", "café", "日本", "😀"};
  for (int i = 0; i < 3000; ++i) {
    for (int k = 0; k < 8; ++k) text += std::string(words[(i * 7 + k * 3 + i / 5) % 12]) + (k < 7 ? " " : "\n");
  }
  write_file_atomic(corpus, text);
  data::SentencePieceTrainOptions o;
  o.vocab_size = 300;  // the 256 byte pieces, the characters, a few merges
  o.model_type = "bpe";
  o.byte_fallback = true;
  data::train_sentencepiece(corpus, model, o);
  const auto t = data::SentencePieceTokenizer::load(model);
  EXPECT_EQ(t.vocab_size(), 300);
  const std::string line = "the lazy fox jumps over the café dog";
  const auto enc = t.encode(line);
  EXPECT_FALSE(enc.empty());
  EXPECT_EQ(t.decode(enc), line);
  const auto with = t.encode(line, true, true);
  EXPECT_EQ(with.front(), t.bos_id());
  EXPECT_EQ(with.back(), t.eos_id());
  EXPECT_EQ(with.size(), enc.size() + 2);
  EXPECT_EQ(t.token_to_id(t.id_to_token(enc[0])), enc[0]);
  // text that is not UTF-8: sentencepiece's own rule, each byte that starts no well-formed
  // sequence read as U+FFFD (here in its three byte pieces); text_tokenizers_python holds 2,000
  // such strings to sentencepiece's own ids
  EXPECT_EQ(t.decode(t.encode("fox \xff\xfe dog \xc3")), "fox \xef\xbf\xbd\xef\xbf\xbd dog \xef\xbf\xbd");
  EXPECT_NE(error_of<IndexError>([&] { t.decode({300}); }).find("id 300 is out of range (valid: 0 to 299)"), std::string::npos);
  EXPECT_NE(error_of<ValueError>([&] { data::SentencePieceTokenizer::from_bytes("not a model"); }).find("not a SentencePiece model"),
            std::string::npos);
  o.vocab_size = 100000;  // more pieces than the corpus has
  EXPECT_NE(error_of<ValueError>([&] { data::train_sentencepiece(corpus, model + "2", o); }).find("sentencepiece's trainer refused"),
            std::string::npos);
  EXPECT_NE(error_of<IOError>([&] { data::train_sentencepiece("/nonexistent/corpus", model + "2", o); }).find("/nonexistent/corpus"),
            std::string::npos);
  std::remove(corpus.c_str());
  std::remove(model.c_str());
}

TEST(TokenWindows, WindowsAreShiftedViewsOfTheIds) {
  std::vector<int32_t> v(23);
  for (int i = 0; i < 23; ++i) v[i] = 100 + i;
  const Tensor all = from_vector(v, {23});
  const data::TokenWindows w(all, 5);
  EXPECT_EQ(w.size(), 4);  // starts 0, 5, 10, 15 (the window at 15 needs ids up to 20)
  const auto ex = w.get(2);
  EXPECT_EQ(ex[0].storage(), all.storage());  // a view: no copy
  EXPECT_EQ(ex[0].to_vector<int32_t>(), (std::vector<int32_t>{110, 111, 112, 113, 114}));
  EXPECT_EQ(ex[1].to_vector<int32_t>(), (std::vector<int32_t>{111, 112, 113, 114, 115}));
  const data::TokenWindows overlapping(all, 5, 1);
  EXPECT_EQ(overlapping.size(), 18);  // every start from 0 to 17
  EXPECT_EQ(overlapping.get(17)[1].to_vector<int32_t>().back(), 122);
  EXPECT_THROW(w.get(4), IndexError);
  const std::string short_msg = error_of<ValueError>([&] { data::TokenWindows(from_vector(std::vector<int32_t>(5, 1), {5}), 5); });
  EXPECT_NE(short_msg.find("5 ids hold no window of 5 steps (valid: at least steps + 1 = 6 ids"), std::string::npos);
  EXPECT_THROW(data::TokenWindows(all, 0), ValueError);
  EXPECT_THROW(data::TokenWindows(all.astype(Float32), 5), ValueError);
}

TEST(TokenWindows, TokenFilesRoundTripAndBadFilesAreRefused) {
  const std::string p16 = temp_path("t16.bin"), p32 = temp_path("t32.bin");
  std::vector<int32_t> v;
  for (int i = 0; i < 1000; ++i) v.push_back((i * 7919) % 65536);
  data::write_token_file(p16, v, data::TokenWidth::UInt16);
  EXPECT_EQ(read_file(p16).size(), 2000u);
  EXPECT_EQ(data::read_token_file(p16, data::TokenWidth::UInt16).to_vector<int32_t>(), v);
  v.push_back(2000000000);
  data::write_token_file(p32, v, data::TokenWidth::UInt32);
  EXPECT_EQ(data::read_token_file(p32, data::TokenWidth::UInt32).to_vector<int32_t>(), v);
  EXPECT_NE(error_of<ValueError>([&] { data::write_token_file(p16, v, data::TokenWidth::UInt16); }).find("id 2000000000 at position 1000"),
            std::string::npos);
  const data::TokenWindows w(p32, data::TokenWidth::UInt32, 100);
  EXPECT_EQ(w.size(), 10);
  write_file_atomic(p16, std::string(7, '\1'));
  EXPECT_NE(error_of<ValueError>([&] { data::read_token_file(p16, data::TokenWidth::UInt16); }).find("not a multiple of 2"),
            std::string::npos);
  write_file_atomic(p32, std::string("\xff\xff\xff\xff", 4));
  EXPECT_NE(error_of<ValueError>([&] { data::read_token_file(p32, data::TokenWidth::UInt32); }).find("id 4294967295"), std::string::npos);
  write_file_atomic(p16, std::string(6, '\0'));  // 3 ids: no window of 3 steps
  EXPECT_THROW(data::TokenWindows(p16, data::TokenWidth::UInt16, 3), ValueError);
  EXPECT_THROW(data::read_token_file("/nonexistent/tokens.bin", data::TokenWidth::UInt16), IOError);
  std::remove(p16.c_str());
  std::remove(p32.c_str());
}

TEST(TokenWindows, ShuffledByTheLoaderTheSameForTheSameSeed) {
  std::vector<int32_t> v(1001);
  for (int i = 0; i < 1001; ++i) v[i] = i;
  auto w = std::make_shared<data::TokenWindows>(from_vector(v, {1001}), 10);
  auto firsts = [&](uint64_t seed) {
    data::DataLoader loader(w, {.batch_size = 4, .shuffle = true, .seed = seed});
    std::vector<int32_t> out;
    for (const data::Batch& b : loader) {
      EXPECT_EQ(b[0].shape(), (Shape{b[0].dim(0), 10}));
      const auto in = b[0].to_vector<int32_t>(), tg = b[1].to_vector<int32_t>();
      for (size_t k = 0; k < in.size(); ++k) EXPECT_EQ(tg[k], in[k] + 1);
      for (int64_t r = 0; r < b[0].dim(0); ++r) out.push_back(in[r * 10]);
    }
    return out;
  };
  const auto a = firsts(7), b = firsts(7), c = firsts(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), 100u);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i * 10);  // every window once
  EXPECT_NE(a, sorted);
}
