// `loom generate`: text from a Hugging Face model folder (GPT-2 or Llama), streamed to the
// terminal as it is written (docs/cli.md, docs/text.md).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli.h"
#include "loom/core/parallel.h"
#include "loom/train/decoder.h"
#include "loom/train/generation.h"
#include "loom/train/language_model.h"

namespace loom::cli {

namespace {

namespace fs = std::filesystem;

double real(const Args& a, const std::string& name, double def) {
  const auto v = a.value(name);
  if (!v) return def;
  try {
    size_t used = 0;
    const double d = std::stod(*v, &used);
    if (used == v->size()) return d;
  } catch (const std::exception&) {
  }
  a.fail(name + " must be a number, got '" + *v + "'");
}

int run(const Args& a) {
  const fs::path dir = a.positional().at(0);
  if (const auto threads = a.value("--threads")) set_num_threads(static_cast<int>(a.integer("--threads", 1, 1)));
  const train::LanguageModel model = train::LanguageModel::load(dir.string());
  const std::string prompt = a.value("--prompt").value_or("");
  std::vector<int64_t> prompt_ids = model.encode(prompt, true);
  const std::vector<int64_t>& eos = model.end_tokens;
  if (prompt_ids.empty()) {
    if (eos.empty()) a.fail("the prompt has no tokens and the model names no end-of-text token to start from (give --prompt)");
    prompt_ids.push_back(eos[0]);  // GPT-2's way to start from nothing: after an end of text
  }
  train::GenerationOptions o;
  o.sampling.temperature = real(a, "--temperature", 0.0);
  o.sampling.top_k = a.integer("--top-k", 0, 0);
  o.sampling.top_p = real(a, "--top-p", 1.0);
  o.sampling.min_p = real(a, "--min-p", 0.0);
  o.sampling.repetition_penalty = real(a, "--repetition-penalty", 1.0);
  o.max_new_tokens = a.integer("--max-new-tokens", 128, 0);
  o.seed = static_cast<uint64_t>(a.integer("--seed", 0, 0));
  o.stop_tokens = eos;
  o.stop_strings = a.values("--stop");
  train::CachedDecoder decoder(model.network, {.max_length = a.integer("--max-length", 0, 0), .int8_weights = a.flag("--int8")});
  std::fputs(terminal_text(prompt, true).c_str(), stdout);
  std::fflush(stdout);
  train::generate(decoder, prompt_ids, o, model.decode, [](int64_t, std::string_view text) {
    std::fputs(terminal_text(std::string(text), true).c_str(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputs("\n", stdout);
  return kExitOk;
}

}  // namespace

const Group& generate_group() {
  static const Group g{
      "generate", "text from a GPT-2 or Llama model folder, streamed as it is written",
      {{"", "MODEL_DIR", 1, 1,
        {{"--prompt", "TEXT", false, "", "the text to continue (default: none, starting after an end of text)"},
         {"--max-new-tokens", "N", false, "", "tokens to write at most (default 128)"},
         {"--temperature", "T", false, "", "0 (the default) for greedy, else sampling from softmax(logits / T)"},
         {"--top-k", "K", false, "", "sample among the K likeliest tokens only (default 0: all)"},
         {"--top-p", "P", false, "", "sample among the smallest set of tokens whose probability reaches P (default 1)"},
         {"--min-p", "P", false, "", "sample among the tokens at least P times as likely as the likeliest (default 0)"},
         {"--repetition-penalty", "R", false, "", "divide the logits of tokens already written by R (default 1: none)"},
         {"--seed", "S", false, "", "the seed of the draws (default 0): the same seed writes the same text"},
         {"--stop", "TEXT", true, "", "end when the text reaches TEXT (not shown); repeatable"},
         {"--max-length", "N", false, "", "positions of the cache (default: the model's)"},
         {"--int8", "", false, "", "quantize the weights to int8 when loading (a quarter of the bytes per token)"},
         {"--threads", "N", false, "", "threads (default: all cores, or $LOOM_NUM_THREADS)"}},
        "loads MODEL_DIR as transformers' save_pretrained writes it (config.json, model.safetensors or its shards; "
        "io::load_hf_checkpoint) with its tokenizer (tokenizer.json, byte-level BPE, or tokenizer.model, SentencePiece), "
        "and writes the continuation of --prompt through the cached decoder, each token as it comes (whole characters "
        "only); it stops after --max-new-tokens, at the model's end-of-text token (config.json's eos_token_id) or at a "
        "--stop text. --int8 quantizes the weights to int8 when loading; a folder saved as int8 (io::save_hf_checkpoint "
        "with int8, docs/text.md#int8-checkpoints) is decoded with its own int8 weights without it",
        run}}};
  return g;
}

}  // namespace loom::cli
