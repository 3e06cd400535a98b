// Choosing the next token (train/generation.h): greedy and its ties, the repetition penalty, the
// distributions that temperature, top-k, top-p and min-p leave (frequencies over many seeded
// draws against the probabilities computed here), reproducibility by seed, refusals; and the
// UTF-8 stream that holds back a character split across tokens; generate()'s loop over a model
// (what it feeds, when it stops, the text it streams, reproducibility) and RecomputingModel.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/nn/layers.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>
#include <loom/train/chat_template.h>
#include <loom/train/generation.h>

#include <cmath>
#include <map>
#include <vector>

using namespace loom;
using train::SamplingOptions;

namespace {

Tensor logits_of(const std::vector<double>& p) {  // log-probabilities, so softmax gives p back
  std::vector<float> z;
  for (double v : p) z.push_back(static_cast<float>(std::log(v)));
  return from_vector<float>(z, {static_cast<int64_t>(z.size())});
}

// Frequencies of `draws` draws against the expected probabilities: each within 5 standard errors
// (and 0 exactly where the probability is 0).
void expect_frequencies(const Tensor& logits, const SamplingOptions& o, const std::vector<double>& want, int draws = 20000) {
  Generator g(123);
  std::vector<int> count(want.size(), 0);
  for (int i = 0; i < draws; ++i) ++count.at(static_cast<size_t>(train::sample_token(logits, o, {}, g)));
  for (size_t k = 0; k < want.size(); ++k) {
    const double f = static_cast<double>(count[k]) / draws, se = std::sqrt(want[k] * (1 - want[k]) / draws);
    if (want[k] == 0) EXPECT_EQ(count[k], 0) << "token " << k;
    else EXPECT_NEAR(f, want[k], 5 * se + 1e-9) << "token " << k;
  }
}

}  // namespace

TEST(Sampling, GreedyTakesTheLargestLogitAndTheLowestIdOfTies) {
  Generator g(1);
  const SamplingOptions greedy{.temperature = 0};
  EXPECT_EQ(train::sample_token(from_vector<float>({0.1f, 3.0f, -1.0f, 3.0f}, {4}), greedy, {}, g), 1);
  EXPECT_EQ(g.counter(), 0u);  // greedy draws nothing
  EXPECT_EQ(train::sample_token(from_vector<double>({-5.0}, {1}), greedy, {}, g), 0);
  // top_k 1 is greedy whatever the draw
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Generator s(seed);
    EXPECT_EQ(train::sample_token(from_vector<float>({0.1f, 2.0f, 1.9f}, {3}), {.top_k = 1}, {}, s), 1);
  }
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  Generator g(1);
  const Tensor z = from_vector<float>({2.0f, 1.9f, -0.5f, -0.55f}, {4});
  const SamplingOptions o{.temperature = 0, .repetition_penalty = 1.2};
  EXPECT_EQ(train::sample_token(z, {.temperature = 0}, {0, 0}, g), 0);
  EXPECT_EQ(train::sample_token(z, o, {0, 0}, g), 1);  // 2 / 1.2 = 1.67 < 1.9
  // among negatives: -0.5 * 1.2 = -0.6 < -0.55
  const Tensor neg = from_vector<float>({-0.5f, -0.55f}, {2});
  EXPECT_EQ(train::sample_token(neg, o, {}, g), 0);
  EXPECT_EQ(train::sample_token(neg, o, {0}, g), 1);
  EXPECT_EQ(train::sample_token(neg, o, {7, -1}, g), 0);  // ids outside the vocabulary are ignored
}

TEST(Sampling, DistributionsOfTemperatureTopKTopPAndMinP) {
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  const Tensor z = logits_of(p);
  expect_frequencies(z, {}, p);
  expect_frequencies(z, {.top_k = 2}, {0.5 / 0.8, 0.3 / 0.8, 0, 0});
  expect_frequencies(z, {.top_p = 0.6}, {0.5 / 0.8, 0.3 / 0.8, 0, 0});   // 0.5 < 0.6: the second is needed
  expect_frequencies(z, {.top_p = 0.5}, {1, 0, 0, 0});                   // the first reaches 0.5
  expect_frequencies(z, {.min_p = 0.25}, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});  // >= 0.125
  // temperature 0.5 squares the probabilities (then normalizes)
  double s = 0;
  for (double v : p) s += v * v;
  expect_frequencies(z, {.temperature = 0.5}, {0.25 / s, 0.09 / s, 0.0225 / s, 0.0025 / s});
  // in order: top_k 3, then top_p 0.8 of the renormalized (0.526, 0.316, 0.158): the first two
  expect_frequencies(z, {.top_k = 3, .top_p = 0.8}, {0.5 / 0.8, 0.3 / 0.8, 0, 0});
}

TEST(Sampling, TheSameSeedGivesTheSameTokens) {
  const Tensor z = logits_of({0.25, 0.25, 0.25, 0.25});
  const auto run = [&](uint64_t seed) {
    Generator g(seed);
    std::vector<int64_t> ids;
    for (int i = 0; i < 32; ++i) ids.push_back(train::sample_token(z, {.temperature = 0.8, .top_p = 0.95}, ids, g));
    return ids;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(Sampling, BadOptionsAndLogitsAreRefusedByName) {
  Generator g;
  const Tensor z = from_vector<float>({1.0f, 2.0f}, {2});
  for (const auto& [o, what] : std::vector<std::pair<SamplingOptions, const char*>>{{{.temperature = -1}, "temperature"},
                                                                                    {{.top_k = -2}, "top_k"},
                                                                                    {{.top_p = 0}, "top_p"},
                                                                                    {{.top_p = 1.5}, "top_p"},
                                                                                    {{.min_p = 2}, "min_p"},
                                                                                    {{.repetition_penalty = 0}, "repetition_penalty"}}) {
    try {
      train::sample_token(z, o, {}, g);
      ADD_FAILURE() << what << " accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(train::sample_token(zeros({2, 2}), {}, {}, g), ValueError);
  EXPECT_THROW(train::sample_token(zeros({0}), {}, {}, g), ValueError);
  EXPECT_THROW(train::sample_token(from_vector<int64_t>({1, 2}, {2}), {}, {}, g), ValueError);
  EXPECT_THROW(train::sample_token(from_vector<float>({INFINITY, 1.0f}, {2}), {}, {}, g), ValueError);
}

TEST(Utf8Stream, HoldsBackACharacterSplitAcrossTokens) {
  train::Utf8Stream s;
  EXPECT_EQ(s.push("caf"), "caf");
  EXPECT_EQ(s.push("\xC3"), "");            // the first byte of é
  EXPECT_EQ(s.push("\xA9 ok"), "\xC3\xA9 ok");
  EXPECT_EQ(s.push("\xF0\x9F"), "");        // an emoji in three tokens
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(s.push("\xFF" "a"), "\xFF" "a");  // a byte that starts no character passes
  EXPECT_EQ(s.push("\xE2\x82" "b"), "\xE2\x82" "b");  // a broken character passes as it is
  EXPECT_EQ(s.push("\xE2"), "");
  EXPECT_EQ(s.finish(), "\xE2");  // what is left at the end
  EXPECT_EQ(s.finish(), "");
}

namespace {

// A model over a vocabulary of 6 whose greedy next token is (last + 1) % 6, and which records
// what it is fed.
struct CountingModel : train::NextTokenModel {
  std::vector<std::vector<int64_t>> fed;
  int resets = 0;
  void reset() override { ++resets; }
  Tensor feed(const std::vector<int64_t>& tokens) override {
    fed.push_back(tokens);
    std::vector<float> z(6, 0.0f);
    z[static_cast<size_t>((tokens.back() + 1) % 6)] = 5.0f;
    return from_vector<float>(z, {6});
  }
};

// Token i's bytes: letters, and the two halves of "é" (4, 5).
std::string decode_bytes(const std::vector<int64_t>& ids) {
  static const char* bytes[] = {"a", "b", "c", "d", "\xC3", "\xA9"};
  std::string s;
  for (int64_t id : ids) s += bytes[id];
  return s;
}

}  // namespace

TEST(Generate, FeedsThePromptOnceThenEachNewToken) {
  CountingModel m;
  const auto g = train::generate(m, {0, 1}, {.sampling = {.temperature = 0}, .max_new_tokens = 4});
  EXPECT_EQ(g.tokens, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(g.finish, train::Generation::Finish::Length);
  EXPECT_EQ(m.resets, 1);
  // the prompt, then every new token but the last (nothing asks for the logits after it)
  EXPECT_EQ(m.fed, (std::vector<std::vector<int64_t>>{{0, 1}, {2}, {3}, {4}}));
  EXPECT_TRUE(train::generate(m, {0}, {.max_new_tokens = 0}).tokens.empty());
}

TEST(Generate, StopsAtAStopTokenAStopStringOrTheCallback) {
  CountingModel m;
  auto g = train::generate(m, {0}, {.sampling = {.temperature = 0}, .max_new_tokens = 10, .stop_tokens = {3}}, decode_bytes);
  EXPECT_EQ(g.tokens, (std::vector<int64_t>{1, 2, 3}));  // the stop token is kept ...
  EXPECT_EQ(g.text, "bc");                               // ... but not in the text
  EXPECT_EQ(g.finish, train::Generation::Finish::StopToken);

  std::string streamed;
  g = train::generate(m, {0}, {.sampling = {.temperature = 0}, .max_new_tokens = 10, .stop_strings = {"cd"}}, decode_bytes,
                      [&](int64_t, std::string_view text) {
                        streamed += text;
                        return true;
                      });
  EXPECT_EQ(g.tokens, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(g.text, "b");  // cut before the stop string, which straddled two tokens
  EXPECT_EQ(streamed, "b");
  EXPECT_EQ(g.finish, train::Generation::Finish::StopString);
  // what might begin a stop string waits for the next token, then shows when it does not
  std::vector<std::string> pieces;
  g = train::generate(m, {0}, {.sampling = {.temperature = 0}, .max_new_tokens = 3, .stop_strings = {"cx"}}, decode_bytes,
                      [&](int64_t, std::string_view text) {
                        pieces.emplace_back(text);
                        return true;
                      });
  EXPECT_EQ(g.text, "bcd");
  EXPECT_EQ(pieces, (std::vector<std::string>{"b", "", "cd"}));

  int calls = 0;
  g = train::generate(m, {0}, {.sampling = {.temperature = 0}, .max_new_tokens = 10}, {}, [&](int64_t, std::string_view) {
    return ++calls < 2;
  });
  EXPECT_EQ(g.tokens.size(), 2u);
  EXPECT_EQ(g.finish, train::Generation::Finish::Callback);
}

TEST(Generate, StreamsWholeCharactersOnly) {
  CountingModel m;
  std::vector<std::string> pieces;
  const auto g = train::generate(m, {2}, {.sampling = {.temperature = 0}, .max_new_tokens = 4}, decode_bytes,
                                 [&](int64_t, std::string_view text) {
                                   pieces.emplace_back(text);
                                   return true;
                                 });
  EXPECT_EQ(g.tokens, (std::vector<int64_t>{3, 4, 5, 0}));
  EXPECT_EQ(pieces, (std::vector<std::string>{"d", "", "\xC3\xA9", "a"}));  // é waits for its second byte
  EXPECT_EQ(g.text, "d\xC3\xA9" "a");
}

// A long generation decodes a window of its last tokens at each step, not all of them (which
// grew with the square of the length), and still streams exactly the decode of all its tokens:
// here with a decoder that, as SentencePiece does, drops the space of a text's first piece and
// writes U+FFFD for a character cut short, and with characters split across tokens.
TEST(Generate, ALongGenerationDecodesAWindowAndStreamsTheWholeText) {
  CountingModel m;
  size_t longest = 0;
  const auto decode = [&](const std::vector<int64_t>& ids) {
    longest = std::max(longest, ids.size());
    static const char* pieces[] = {" a", "b", " c", "d", "\xC3", "\xA9"};
    std::string s;
    for (int64_t id : ids) s += pieces[id];
    if (!s.empty() && s[0] == ' ') s.erase(0, 1);
    if (!s.empty() && s.back() == '\xC3') s.replace(s.size() - 1, 1, "\xEF\xBF\xBD");
    return s;
  };
  std::string streamed;
  const auto g = train::generate(m, {5}, {.sampling = {.temperature = 0}, .max_new_tokens = 600}, decode,
                                 [&](int64_t, std::string_view text) {
                                   streamed += text;
                                   return true;
                                 });
  ASSERT_EQ(g.tokens.size(), 600u);
  longest = 0;
  const std::string whole = decode(g.tokens);
  EXPECT_EQ(g.text, whole);
  EXPECT_EQ(streamed, whole);
  std::string again;  // and the same at every length, the window moving or not
  for (int n : {1, 5, 13, 14, 25, 61}) {
    again.clear();
    const auto h = train::generate(m, {5}, {.sampling = {.temperature = 0}, .max_new_tokens = n}, decode,
                                   [&](int64_t, std::string_view text) {
                                     again += text;
                                     return true;
                                   });
    EXPECT_EQ(again, decode(h.tokens)) << n;
  }
  longest = 0;
  train::generate(m, {5}, {.sampling = {.temperature = 0}, .max_new_tokens = 600}, decode);
  EXPECT_LE(longest, 20u);  // a window of a few tokens, not the 600
}

TEST(Generate, TheSameSeedGivesTheSameTokens) {
  struct Flat : train::NextTokenModel {  // every token equally likely
    void reset() override {}
    Tensor feed(const std::vector<int64_t>&) override { return zeros({50}); }
  } m;
  const train::GenerationOptions o{.sampling = {.temperature = 1}, .max_new_tokens = 32, .seed = 5};
  const auto a = train::generate(m, {0}, o), b = train::generate(m, {0}, o);
  EXPECT_EQ(a.tokens, b.tokens);
  auto other = o;
  other.seed = 6;
  EXPECT_NE(train::generate(m, {0}, other).tokens, a.tokens);
}

// The state generate() loops over, driven step by step as the server's continuous batching does:
// the same tokens and text pieces as generate, cancel() ending it and giving what was held back.
TEST(GenerationState, StepsAsGenerateDoes) {
  CountingModel m;
  const train::GenerationOptions o{.sampling = {.temperature = 0}, .max_new_tokens = 6, .stop_strings = {"cx"}};
  std::vector<std::string> streamed;
  const auto g = train::generate(m, {1}, o, decode_bytes, [&](int64_t, std::string_view text) {
    streamed.emplace_back(text);
    return true;
  });
  train::GenerationState state({1}, o, decode_bytes);
  std::vector<std::string> stepped;
  Tensor logits = m.feed({1});
  while (!state.done()) {
    const auto step = state.next(logits);
    stepped.push_back(step.text);
    if (!step.done) logits = m.feed({step.token});
  }
  EXPECT_EQ(stepped, streamed);
  EXPECT_EQ(state.result().tokens, g.tokens);
  EXPECT_EQ(state.result().text, g.text);
  EXPECT_THROW(state.next(logits), ValueError);
  // cancelled while "c" is held (it may begin "cx"): the held text comes back
  train::GenerationState cut({0}, o, decode_bytes);
  EXPECT_EQ(cut.next(m.feed({0})).text, "b");
  EXPECT_EQ(cut.next(m.feed({1})).text, "");  // "c" held back
  EXPECT_EQ(cut.cancel(), "c");
  EXPECT_TRUE(cut.done());
  EXPECT_EQ(cut.result().finish, train::Generation::Finish::Callback);
  EXPECT_TRUE(train::GenerationState({0}, {.max_new_tokens = 0}).done());
  EXPECT_THROW(train::GenerationState({}, {}), ValueError);
}

TEST(ChatTemplate, FormatsEachRoleAndRefusesBadTemplates) {
  const auto t = train::ChatTemplate::parse(
      R"({"bos": "<s>", "user": "[U]{content}[/U]", "assistant": "{content}</s>", "generation_prompt": "", "stop": ["</s>"]})");
  EXPECT_EQ(t.apply({{"user", "hi"}, {"assistant", "yo"}, {"user", "again"}}), "<s>[U]hi[/U]yo</s>[U]again[/U]");
  EXPECT_EQ(t.stop(), (std::vector<std::string>{"</s>"}));
  EXPECT_EQ(t.roles(), (std::vector<std::string>{"assistant", "user"}));
  try {
    t.apply({{"system", "x"}});
    ADD_FAILURE() << "a role without a format was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("no format for role \"system\" (the template has assistant, user)"), std::string::npos) << e.what();
  }
  for (const char* bad : {"[1]", "{\"user\": \"no content\"}", "{\"user\": \"{content}{content}\"}", "{\"user\": 3}",
                          "{\"stop\": [\"x\"]}", "{\"user\": \"{content}\", \"stop\": [\"\"]}", "not json"})
    EXPECT_THROW(train::ChatTemplate::parse(bad), ValueError) << bad;
  EXPECT_TRUE(train::ChatTemplate().empty());
}

TEST(Generate, RefusesWhatItCannotDo) {
  CountingModel m;
  EXPECT_THROW(train::generate(m, {}, {}), ValueError);                                  // no prompt
  EXPECT_THROW(train::generate(m, {0}, {.max_new_tokens = -1}), ValueError);
  EXPECT_THROW(train::generate(m, {0}, {.stop_strings = {"x"}}), ValueError);             // no decode to read them
  EXPECT_THROW(train::generate(m, {0}, {.stop_strings = {""}}, decode_bytes), ValueError);
  EXPECT_THROW(train::generate(m, {0}, {.sampling = {.top_p = 0}}), ValueError);
}

// A causal stand-in for a language model: position t's logits (vocab 5) count each id among the
// ids up to t, so they tell which tokens were read (and that the padding after t was not).
zoo::Network prefix_counts(int64_t window) {
  nn::Input ids(Shape{-1, window}, Int64, "ids");
  nn::Layer out = nn::Lambda(
      {ids}, [](const std::vector<Tensor>& x) { return cumsum(equal(x[0].expand_dims(-1), arange(5, Int64)).astype(Float32), 1); },
      Shape{-1, window, 5}, Float32, "prefix_counts");
  return zoo::Network{.name = "prefix", .graph = Graph::build(out, {ids}), .inputs = {ids}, .output = out};
}

TEST(RecomputingModel, AnswersTheLogitsAtTheLastRealPosition) {
  for (const int64_t window : {int64_t{-1}, int64_t{8}}) {
    train::RecomputingModel m(prefix_counts(window), /*pad_id=*/4);
    EXPECT_EQ(m.feed({1, 2, 2}).to_vector<float>(), (std::vector<float>{0, 1, 2, 0, 0})) << "window " << window;
    EXPECT_EQ(m.feed({3}).to_vector<float>(), (std::vector<float>{0, 1, 2, 1, 0}));
    m.reset();
    EXPECT_EQ(m.feed({0}).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 0}));
    EXPECT_THROW(m.feed({}), ValueError);
  }
  // past a fixed window, its last 8 tokens are read
  train::RecomputingModel m(prefix_counts(8));
  m.feed({0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  EXPECT_EQ(m.feed({2}).to_vector<float>(), (std::vector<float>{2, 5, 1, 0, 0}));
  nn::Input floats(Shape{-1, 8}, Float32, "x");
  EXPECT_THROW(train::RecomputingModel(zoo::Network{.name = "f", .graph = Graph::build(floats, {floats}), .inputs = {floats}, .output = floats}),
               ValueError);
}
