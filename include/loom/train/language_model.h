#pragma once
// A language model ready to generate text (docs/text.md): the network, its tokenizer's encode
// and decode, its end-of-text tokens and its chat template, as `loom generate` and `loom serve`
// load them from a model folder.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/api.h"
#include "loom/train/chat_template.h"
#include "loom/train/generation.h"
#include "loom/zoo/architectures.h"

namespace loom::train {

struct LOOM_API LanguageModel {
  zoo::Network network;  // built by zoo::gpt or zoo::llama
  // Token ids of a text; with `special`, the tokenizer's own additions (a begin-of-text token).
  std::function<std::vector<int64_t>(std::string_view text, bool special)> encode;
  DecodeFn decode;                  // the text of token ids
  std::vector<int64_t> end_tokens;  // config.json's eos_token_id (one id or a list), maybe none
  ChatTemplate chat_template;       // chat_template.json when the folder has one, else empty

  // A folder as transformers' save_pretrained writes it (config.json, model.safetensors or its
  // shards: io::load_hf_checkpoint) with its tokenizer, tokenizer.json (byte-level BPE) or
  // tokenizer.model (SentencePiece), and optionally chat_template.json (ChatTemplate). The
  // errors of the parts, and ValueError for a folder with no tokenizer.
  static LanguageModel load(const std::string& dir);
};

}  // namespace loom::train
