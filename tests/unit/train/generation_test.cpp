// Choosing the next token (train/generation.h): greedy and its ties, the repetition penalty, the
// distributions that temperature, top-k, top-p and min-p leave (frequencies over many seeded
// draws against the probabilities computed here), reproducibility by seed, refusals; and the
// UTF-8 stream that holds back a character split across tokens.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
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
