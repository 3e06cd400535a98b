// The cached decoder (train/decoder.h) against the same network run on the whole text: for GPT-2
// and Llama (grouped-query heads, RoPE with Llama 3's scaling, a tied head), every position of a
// 64-token sequence fed as a prompt, in chunks and one token at a time gives the full run's logits
// within 1e-5 relative; several sequences of different lengths decoded in one pass as each
// alone; int8 weights (the float decoder of the dequantized weights, and near the float one; an
// int8 checkpoint decoding exactly as the network it was saved from);
// truncate, reset, the cache's fixed memory, generate() over it, refusals.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/memory.h>
#include <loom/core/tensor.h>
#include <loom/io/hf_checkpoint.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/ops/quantized.h>
#include <loom/train/decoder.h>

#include <cmath>
#include <string>
#include <vector>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

constexpr int64_t kVocab = 97, kLength = 64;

zoo::Network small_gpt() {
  manual_seed(3);
  return zoo::gpt({.vocab_size = kVocab, .n_positions = 80, .n_embd = 32, .n_layer = 2, .n_head = 4, .initializer_range = 0.2});
}

zoo::Network small_llama() {
  manual_seed(4);
  zoo::LlamaConfig c{.vocab_size = kVocab, .hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2,
                     .num_attention_heads = 4, .num_key_value_heads = 2, .max_position_embeddings = 128,
                     .tie_word_embeddings = true, .initializer_range = 0.2};
  c.rope = {.base = 500000.0, .llama3_factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_max_positions = 16};
  return zoo::llama(c);
}

std::vector<int64_t> random_ids(uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kLength; ++i) ids.push_back(static_cast<int64_t>(g.next_key() % kVocab));
  return ids;
}

// The network's logits (T, vocab) for the whole sequence at once.
Tensor full_logits(const zoo::Network& net, const std::vector<int64_t>& ids) {
  NoGrad no_grad;
  return net(from_vector<int64_t>(ids, {1, static_cast<int64_t>(ids.size())}))[0];
}

// max |a - b| / max |b|
double relative(const Tensor& a, const Tensor& b) {
  const double diff = max(abs(a - b)).item<double>(), scale = max(abs(b)).item<double>();
  return diff / scale;
}

void expect_cached_equals_full(const zoo::Network& net) {
  const std::vector<int64_t> ids = random_ids(9);
  const Tensor full = full_logits(net, ids);
  train::CachedDecoder decoder(net);
  // a prompt of 8, a chunk of 5 (positions 8-12, masked against the 8 cached), then one by one
  Tensor prompt = decoder.feed_all({ids.begin(), ids.begin() + 8});
  EXPECT_LT(relative(prompt, slice(full, 0, 0, 8)), 1e-5);
  Tensor chunk = decoder.feed_all({ids.begin() + 8, ids.begin() + 13});
  EXPECT_LT(relative(chunk, slice(full, 0, 8, 13)), 1e-5);
  for (int64_t t = 13; t < kLength; ++t) {
    const Tensor step = decoder.feed({ids[static_cast<size_t>(t)]});
    ASSERT_LT(relative(step, full[t]), 1e-5) << net.name << " position " << t;
  }
  EXPECT_EQ(decoder.length(), kLength);
  // back to position 30: the same logits again from there
  decoder.truncate(30);
  EXPECT_LT(relative(decoder.feed({ids[30]}), full[30]), 1e-5);
  decoder.reset();
  EXPECT_LT(relative(decoder.feed({ids.begin(), ids.begin() + 3}), full[2]), 1e-5);
}

}  // namespace

TEST(CachedDecoder, GptEveryPositionEqualsTheFullRun) { expect_cached_equals_full(small_gpt()); }

TEST(CachedDecoder, LlamaEveryPositionEqualsTheFullRun) { expect_cached_equals_full(small_llama()); }

TEST(CachedDecoder, SlotsOfDifferentLengthsInOnePassEqualEachAlone) {
  for (const zoo::Network& net : {small_gpt(), small_llama()}) {
    const std::vector<int64_t> a = random_ids(1), b = random_ids(2), c = random_ids(3);
    const Tensor fa = full_logits(net, a), fb = full_logits(net, b), fc = full_logits(net, c);
    train::CachedDecoder decoder(net, {.slots = 3});
    // prompts of 5, 11 and 2 tokens in one pass, no padding
    Tensor z = decoder.feed_slots({{a.begin(), a.begin() + 5}, {b.begin(), b.begin() + 11}, {c.begin(), c.begin() + 2}});
    ASSERT_EQ(z.shape(), (Shape{3, kVocab}));
    EXPECT_LT(relative(z[0], fa[4]), 1e-5) << net.name;
    EXPECT_LT(relative(z[1], fb[10]), 1e-5);
    EXPECT_LT(relative(z[2], fc[1]), 1e-5);
    // then one token each, slot 1 sitting out a step and slot 2 joining with a chunk
    z = decoder.feed_slots({{a[5]}, {}, {c.begin() + 2, c.begin() + 6}});
    ASSERT_EQ(z.shape(), (Shape{2, kVocab}));
    EXPECT_LT(relative(z[0], fa[5]), 1e-5);
    EXPECT_LT(relative(z[1], fc[5]), 1e-5);
    for (int64_t t = 0; t < 20; ++t) {
      z = decoder.feed_slots({{a[static_cast<size_t>(6 + t)]}, {b[static_cast<size_t>(11 + t)]}, {c[static_cast<size_t>(6 + t)]}});
      ASSERT_LT(relative(z[0], fa[6 + t]), 1e-5) << net.name << " step " << t;
      ASSERT_LT(relative(z[1], fb[11 + t]), 1e-5);
      ASSERT_LT(relative(z[2], fc[6 + t]), 1e-5);
    }
    EXPECT_EQ(decoder.length(0), 26);
    EXPECT_EQ(decoder.length(1), 31);
    // a finished sequence leaves and a new one takes its slot
    decoder.reset(1);
    z = decoder.feed_slots({{}, {c.begin(), c.begin() + 7}});
    EXPECT_LT(relative(z[0], fc[6]), 1e-5);
    EXPECT_THROW(decoder.feed_slots({{1}, {1}, {1}, {1}}), ValueError);  // 4 slots of 3
    EXPECT_THROW(decoder.feed_slots({{}, {}}), ValueError);              // nothing to feed
    EXPECT_THROW(decoder.reset(3), IndexError);
  }
}

// The server's promise (docs/serve.md, "Generation"): a sequence's logits do not depend on who
// shares its passes. A decoder of several slots computes its products batch-invariantly, so
// sequence a's logits have the same bits fed alone as beside two others, prompt and steps
// (sizes where oneDNN rounds a row by the call's rows: 128-wide rows, a 512-wide MLP).
TEST(CachedDecoder, ASequencesLogitsDoNotDependOnWhoSharesItsPasses) {
  manual_seed(5);
  const zoo::Network net = zoo::gpt({.vocab_size = kVocab, .n_positions = 80, .n_embd = 128, .n_layer = 2, .n_head = 4});
  const std::vector<int64_t> a = random_ids(1), b = random_ids(2), c = random_ids(3);
  train::CachedDecoder alone(net, {.slots = 3}), shared(net, {.slots = 3});
  Tensor za = alone.feed_slots({{a.begin(), a.begin() + 6}});
  Tensor zs = shared.feed_slots({{a.begin(), a.begin() + 6}, {b.begin(), b.begin() + 9}, {c.begin(), c.begin() + 4}});
  EXPECT_TRUE(array_equal(za[0], zs[0])) << "the prompt's logits";
  for (size_t t = 6; t < 16; ++t) {
    za = alone.feed_slots({{a[t]}});
    zs = shared.feed_slots({{a[t]}, {b[t + 3]}, {c[t - 2]}});
    ASSERT_TRUE(array_equal(za[0], zs[0])) << "step at position " << t;
  }
}

TEST(CachedDecoder, TheCacheIsAllocatedOnceAndTokensAddNoMemory) {
  const zoo::Network net = small_llama();
  train::CachedDecoder decoder(net, {.max_length = 100});
  // 2 layers x (keys + values) x 2 kv heads x 100 positions x 8 floats
  EXPECT_EQ(decoder.cache_bytes(), 2 * 2 * 2 * 100 * 8 * 4);
  const std::vector<int64_t> ids = random_ids(5);
  decoder.feed({ids.begin(), ids.begin() + 4});
  decoder.feed({ids[4]});
  const int64_t live = memory_stats().current_bytes;
  for (int64_t t = 5; t < kLength; ++t) decoder.feed({ids[static_cast<size_t>(t)]});
  EXPECT_EQ(memory_stats().current_bytes, live);  // nothing kept per token: the cache was there
}

TEST(CachedDecoder, GenerateGivesTheTokensOfRecomputation) {
  const zoo::Network net = small_gpt();
  train::CachedDecoder cached(net);
  train::RecomputingModel recomputing(net);
  const train::GenerationOptions greedy{.sampling = {.temperature = 0}, .max_new_tokens = 40};
  EXPECT_EQ(train::generate(cached, {1, 2, 3}, greedy).tokens, train::generate(recomputing, {1, 2, 3}, greedy).tokens);
  const train::GenerationOptions sampled{.sampling = {.temperature = 0.9, .top_k = 20}, .max_new_tokens = 40, .seed = 3};
  EXPECT_EQ(train::generate(cached, {5}, sampled).tokens, train::generate(recomputing, {5}, sampled).tokens);
}

TEST(CachedDecoder, RefusesWhatItCannotHold) {
  const zoo::Network gpt = small_gpt();
  EXPECT_THROW(train::CachedDecoder(gpt, {.max_length = 81}), ValueError);  // past the 80 learned positions
  EXPECT_THROW(train::CachedDecoder(gpt, {.max_length = -1}), ValueError);
  EXPECT_THROW(train::CachedDecoder(gpt, {.int8_weights = true, .int8_group = -1}), ValueError);
  EXPECT_THROW(train::CachedDecoder(zoo::mlp(4, {8}, 2)), ValueError);  // not a language model
  train::CachedDecoder decoder(gpt, {.max_length = 10});
  EXPECT_THROW(decoder.feed({}), ValueError);
  decoder.feed({1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_THROW(decoder.feed({1, 2, 3}), ValueError);  // 8 + 3 > 10
  EXPECT_EQ(decoder.length(), 8);                       // and nothing was half fed
  train::CachedDecoder two(gpt, {.max_length = 10, .slots = 2});
  two.feed_slots({{1}, {1, 2, 3, 4, 5, 6, 7, 8, 9}});
  EXPECT_THROW(two.feed_slots({{1}, {1, 2}}), ValueError);  // slot 1 is full: slot 0 is not fed either
  EXPECT_EQ(two.length(0), 1);
  EXPECT_THROW(train::CachedDecoder(gpt, {.max_length = 10, .slots = 0}), ValueError);
  EXPECT_THROW(decoder.truncate(9), ValueError);
  EXPECT_NO_THROW(decoder.feed({1, 2}));
}

TEST(CachedDecoder, Int8WeightsAreTheFloatDecoderOfTheDequantizedWeights) {
  for (const int64_t group : {int64_t{0}, int64_t{16}}) {
    zoo::LlamaConfig c{.vocab_size = kVocab, .hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2,
                       .num_attention_heads = 4, .num_key_value_heads = 2, .tie_word_embeddings = false, .initializer_range = 0.2};
    manual_seed(8);
    const zoo::Network net = zoo::llama(c);
    manual_seed(8);
    const zoo::Network rounded = zoo::llama(c);
    // every matrix of the blocks and the head replaced by what its int8 form stands for
    for (const auto& layer : rounded.graph.nodes()) {
      if (std::string(layer.kind()) == "Lookup") continue;
      for (auto [name, t] : layer.state().all_params())
        if (t.ndim() == 2) {
          NoGrad no_grad;
          t.copy_(dequantize(quantize_int8(t, std::min(group, t.dim(0)))));
        }
    }
    train::CachedDecoder int8(net, {.int8_weights = true, .int8_group = group}), reference(rounded);
    const std::vector<int64_t> ids = random_ids(4);
    // The int8 products also round their inputs to int16 (2^-16 of each row's largest value):
    // 1.6e-4 after the two layers here; a wrong scale or group would be off by percents.
    EXPECT_LT(relative(int8.feed_all({ids.begin(), ids.begin() + 10}), reference.feed_all({ids.begin(), ids.begin() + 10})), 1e-3);
    for (int64_t t = 10; t < 30; ++t)
      ASSERT_LT(relative(int8.feed({ids[static_cast<size_t>(t)]}), reference.feed({ids[static_cast<size_t>(t)]})), 1e-3) << t;
    // a quarter of the bytes, and near the float decoder
    train::CachedDecoder exact(net);
    EXPECT_LT(int8.weight_bytes() * 3, exact.weight_bytes()) << int8.weight_bytes() << " vs " << exact.weight_bytes();
    exact.feed({ids.begin(), ids.begin() + 10});
    int8.reset();
    EXPECT_LT(relative(int8.feed({ids.begin(), ids.begin() + 11}), exact.feed({ids[10]})), 0.05);
  }
  // GPT-2's head is its token table: quantized for the head, float for the embedding
  const zoo::Network gpt = small_gpt();
  train::CachedDecoder int8(gpt, {.int8_weights = true}), exact(gpt);
  const std::vector<int64_t> ids = random_ids(6);
  EXPECT_LT(relative(int8.feed({ids.begin(), ids.begin() + 20}), exact.feed({ids.begin(), ids.begin() + 20})), 0.05);
}

// An int8 checkpoint (io::save_hf_checkpoint with int8) loads its values and scales as they are:
// the decoder of the loaded folder gives exactly the logits of the int8 decoder of the network
// that was saved, for GPT-2 (tied head) and Llama (its own head), per output and per group of 16.
TEST(CachedDecoder, Int8CheckpointDecodesAsTheNetworkItWasSavedFrom) {
  loom_test::TempDir tmp;
  for (const int64_t group : {int64_t{0}, int64_t{16}}) {
    for (const zoo::Network& net : {small_gpt(), small_llama()}) {
      const std::string dir = tmp / (net.name + std::to_string(group));
      io::save_hf_checkpoint(net, dir, {.int8 = true, .int8_group = group});
      const zoo::Network loaded = io::load_hf_checkpoint(dir);
      ASSERT_FALSE(loaded.int8.empty());
      // int8 without being asked (the folder's weights are int8), and the float network's are not
      train::CachedDecoder original(net, {.int8_weights = true, .int8_group = group}), back(loaded), exact(net);
      EXPECT_EQ(back.weight_bytes(), original.weight_bytes());
      EXPECT_LT(back.weight_bytes() * 2, exact.weight_bytes());  // biases and norms stay float: about a third here
      const std::vector<int64_t> ids = random_ids(5);
      EXPECT_TRUE(array_equal(back.feed_all({ids.begin(), ids.begin() + 12}), original.feed_all({ids.begin(), ids.begin() + 12})))
          << net.name << " group " << group;
      for (int64_t t = 12; t < 24; ++t)
        ASSERT_TRUE(array_equal(back.feed({ids[static_cast<size_t>(t)]}), original.feed({ids[static_cast<size_t>(t)]})))
            << net.name << " group " << group << " position " << t;
      // the int8 forms are the folder's: another group cannot be asked of them
      if (group == 16) EXPECT_THROW(train::CachedDecoder(loaded, {.int8_group = 8}), ValueError);
    }
  }
}
