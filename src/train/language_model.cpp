#include "loom/train/language_model.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/data/tokenizer.h"
#include "loom/io/hf_checkpoint.h"

namespace loom::train {

namespace {

namespace fs = std::filesystem;

std::vector<int64_t> widen(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

std::vector<int32_t> narrow(const std::vector<int64_t>& ids) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id > INT32_MAX) throw IndexError("token id " + std::to_string(id) + " is outside the tokenizer's range");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// config.json's end-of-text token(s): one id or a list (Llama 3), none when absent.
std::vector<int64_t> end_tokens_of(const fs::path& dir) {
  std::string error;
  const auto config = detail::parse_json(read_file((dir / "config.json").string()), &error);
  std::vector<int64_t> ids;
  if (!config || !config->is_object() || !config->contains("eos_token_id")) return ids;
  const auto& eos = (*config)["eos_token_id"];
  if (const auto id = detail::json_to_int(eos, 0)) ids.push_back(*id);
  if (eos.is_array())
    for (const auto& e : eos)
      if (const auto id = detail::json_to_int(e, 0)) ids.push_back(*id);
  return ids;
}

}  // namespace

LanguageModel LanguageModel::load(const std::string& folder) {
  const fs::path dir = folder;
  LanguageModel m;
  m.network = io::load_hf_checkpoint(folder);
  if (fs::exists(dir / "tokenizer.json")) {
    const auto bpe = data::BpeTokenizer::load((dir / "tokenizer.json").string());
    m.encode = [bpe](std::string_view text, bool special) { return widen(bpe.encode(text, special)); };
    m.decode = [bpe](const std::vector<int64_t>& ids) { return bpe.decode(narrow(ids), true); };
  } else if (fs::exists(dir / "tokenizer.model")) {
    const auto spm = data::SentencePieceTokenizer::load((dir / "tokenizer.model").string());
    m.encode = [spm](std::string_view text, bool special) { return widen(spm.encode(text, special && spm.bos_id() >= 0)); };
    m.decode = [spm](const std::vector<int64_t>& ids) { return spm.decode(narrow(ids)); };
  } else {
    throw ValueError("no tokenizer in " + folder + " (tokenizer.json, byte-level BPE, or tokenizer.model, SentencePiece)");
  }
  m.end_tokens = end_tokens_of(dir);
  if (fs::exists(dir / "chat_template.json")) m.chat_template = ChatTemplate::load((dir / "chat_template.json").string());
  return m;
}

}  // namespace loom::train
