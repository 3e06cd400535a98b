// `loom generate` (tools/cli, docs/cli.md) on GPT-2 folders written by io::save_hf_checkpoint:
// what it streams is what train::generate writes.
#include <loom/core/text.h>
#include <loom/data/tokenizer.h>
#include <loom/io/hf_checkpoint.h>
#include <loom/train/decoder.h>
#include <loom/train/generation.h>
#include <loom/zoo/architectures.h>

#include "unit/data/tiny_bpe.h"
#include "unit/tools/cli_runner.h"

using namespace loom;
using namespace loom_test;
using nlohmann::json;

// `loom generate` on a GPT-2 folder written by io::save_hf_checkpoint with a byte-level BPE
// tokenizer.json: what it streams is the prompt and then what train::generate writes through the
// cached decoder (greedy, and seeded sampling), as the terminal is shown it; refusals.
TEST(CliGenerate, StreamsWhatGenerateWrites) {
  loom_test::TempDir tmp;
  const std::string dir = tmp.dir.string();
  const std::string folder = dir + "/tiny-gpt2";
  manual_seed(2);
  const zoo::Network net = zoo::gpt({.vocab_size = 301, .n_positions = 64, .n_embd = 32, .n_layer = 1, .n_head = 2});
  io::save_hf_checkpoint(net, folder);
  std::ofstream(folder + "/tokenizer.json") << test_tokenizers::tiny_json().dump();
  const data::BpeTokenizer tokenizer = data::BpeTokenizer::load(folder + "/tokenizer.json");
  const auto expected = [&](const std::string& prompt, const train::GenerationOptions& o) {
    const std::vector<int32_t> p = tokenizer.encode(prompt);
    train::CachedDecoder decoder(net);
    const train::Generation g = train::generate(decoder, {p.begin(), p.end()}, o, [&](const std::vector<int64_t>& ids) {
      return tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.end()), true);
    });
    return escape_text(prompt + g.text, true) + "\n";
  };
  Cli cli(dir);
  CliResult r = cli({"generate", folder, "--prompt", "hello", "--max-new-tokens", "12"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, expected("hello", {.sampling = {.temperature = 0}, .max_new_tokens = 12}));
  r = cli({"generate", folder, "--prompt", "aa", "--max-new-tokens", "9", "--temperature", "0.9", "--top-k", "20", "--seed", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, expected("aa", {.sampling = {.temperature = 0.9, .top_k = 20}, .max_new_tokens = 9, .seed = 4}));
  // refusals: a bad number, a folder without a tokenizer, a folder that is no model
  EXPECT_EQ(cli({"generate", folder, "--temperature", "warm"}).code, 2);
  std::filesystem::remove(folder + "/tokenizer.json");
  r = cli({"generate", folder});
  EXPECT_EQ(r.code, 1);  // the library refused the folder (a ValueError)
  EXPECT_NE(r.err.find("no tokenizer"), std::string::npos) << r.err;
  EXPECT_NE(cli({"generate", dir + "/nothing"}).code, 0);
}

// `loom generate` on a folder saved as int8 (io::save_hf_checkpoint with int8) writes what the
// network's int8 decoder writes, without --int8: the folder's own int8 weights.
TEST(CliGenerate, Int8FoldersDecodeWithTheirInt8Weights) {
  loom_test::TempDir tmp;
  const std::string dir = tmp.dir.string(), folder = dir + "/tiny-gpt2-int8";
  manual_seed(2);
  const zoo::Network net = zoo::gpt({.vocab_size = 301, .n_positions = 64, .n_embd = 32, .n_layer = 1, .n_head = 2});
  io::save_hf_checkpoint(net, folder, {.int8 = true});
  std::ofstream(folder + "/tokenizer.json") << test_tokenizers::tiny_json().dump();
  const data::BpeTokenizer tokenizer = data::BpeTokenizer::load(folder + "/tokenizer.json");
  const std::vector<int32_t> p = tokenizer.encode("hello");
  train::CachedDecoder decoder(net, {.int8_weights = true});
  const train::Generation g = train::generate(decoder, {p.begin(), p.end()}, {.sampling = {.temperature = 0}, .max_new_tokens = 16},
                                              [&](const std::vector<int64_t>& ids) {
                                                return tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.end()), true);
                                              });
  const CliResult r = Cli(dir)({"generate", folder, "--prompt", "hello", "--max-new-tokens", "16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, escape_text("hello" + g.text, true) + "\n");
}
