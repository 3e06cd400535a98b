// The decoder blocks as layers (nn/decoder_block.h): causality, the padding mask, shapes and
// refusals. Their values and gradients against transformers' GPT2Block and LlamaDecoderLayer are
// tests/hf's hf_blocks_python; saving and loading, layer_registry_test's round trip.
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/decoder_block.h>
#include <loom/nn/input.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

// A GPT-2 block and a Llama block (grouped-query, rotary) on the same input, with or without a
// padding mask.
std::vector<nn::Layer> blocks(const nn::Input& x, std::optional<nn::Layer> keep) {
  return {nn::GptBlock(x, 2, {.ff_units = 20}, keep, "gpt"),
          nn::LlamaBlock(x, 4, {.ff_units = 24, .n_kv_heads = 2, .rotary = {.base = 1e4}}, keep, "llama")};
}

double max_abs(const Tensor& t) { return max(abs(t)).item<double>(); }

}  // namespace

// A position's output depends on it and the positions before it, never on those after.
TEST(DecoderBlocks, AreCausal) {
  manual_seed(4);
  nn::Input x(Shape{-1, -1, 16}, Float64, "x");
  for (nn::Layer& b : blocks(x, std::nullopt)) {
    SCOPED_TRACE(b.kind());
    EXPECT_EQ(b.shape(), (Shape{-1, -1, 16}));
    const Tensor v = randn({2, 9, 16}, Float64);
    x.set_value(v);
    const Tensor y = b();
    Tensor changed = v.copy();
    changed.index_put_({Slice(), 6}, randn({2, 16}, Float64));
    x.set_value(changed);
    const Tensor z = b();
    EXPECT_EQ(max_abs(slice(y, 1, 0, 6) - slice(z, 1, 0, 6)), 0.0);
    EXPECT_GT(max_abs(slice(y, 1, 6, 9) - slice(z, 1, 6, 9)), 1e-3);
  }
}

// A padded position (keep false) is seen by no query but its own output stays defined; the other
// positions' outputs are those of the sequence without it.
TEST(DecoderBlocks, PaddedPositionsReachNoOtherPosition) {
  manual_seed(5);
  nn::Input x(Shape{-1, -1, 16}, Float64, "x"), keep(Shape{-1, -1}, Bool, "keep");
  for (nn::Layer& b : blocks(x, keep)) {
    SCOPED_TRACE(b.kind());
    Tensor k = ones({2, 7}, Bool);
    k.index_put_({1, 2}, false);
    keep.set_value(k);
    const Tensor v = randn({2, 7, 16}, Float64);
    x.set_value(v);
    const Tensor y = b();
    Tensor changed = v.copy();
    changed.index_put_({1, 2}, randn({16}, Float64));
    x.set_value(changed);
    const Tensor z = b();
    EXPECT_EQ(max_abs(slice(slice(y, 0, 1, 2), 1, 3, 7) - slice(slice(z, 0, 1, 2), 1, 3, 7)), 0.0);
    EXPECT_EQ(max_abs(slice(y, 0, 0, 1) - slice(z, 0, 0, 1)), 0.0);
    EXPECT_TRUE(all(abs(y) < INFINITY).item<bool>());
  }
}

TEST(DecoderBlocks, RefuseBadArgumentsClearly) {
  nn::Input x(Shape{-1, -1, 12}, Float32, "x"), ids(Shape{-1, -1, 12}, Int64, "ids"), flat(Shape{-1, 12}, Float32, "flat");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::GptBlock(x, 5); }), {"GptBlock", "12 units", "5 heads"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::GptBlock(x, 2, {.ff_units = -1}); }), {"GptBlock", "ff_units"}));
  EXPECT_TRUE(contains_all(error_message<DTypeError>([&] { nn::GptBlock(ids, 2); }), {"GptBlock", "int64", "floating"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { nn::GptBlock(flat, 2); }), {"GptBlock", "(batch, length, units)"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::LlamaBlock(x, 2, {}); }), {"LlamaBlock", "ff_units", "intermediate_size"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::LlamaBlock(x, 4, {.ff_units = 8, .n_kv_heads = 3}); }),
                           {"LlamaBlock", "n_kv_heads 3", "divide n_heads 4"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { nn::LlamaBlock(x, 4, {.ff_units = 8}); }), {"LlamaBlock", "even head size", "3"}));
  EXPECT_THROW(nn::LlamaBlock(x, 2, {.ff_units = 8, .rotary = {.base = -1}}), ValueError);
}
