// libloom_sentencepiece.so: Debian's libsentencepiece behind the table of api.h (why a module of
// its own: api.h). Built and installed with libloom, opened by it on first use.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "data/sentencepiece/api.h"

namespace {

using loom::data::detail::SentencePieceApi;

const sentencepiece::SentencePieceProcessor& sp(const void* h) {
  return *static_cast<const sentencepiece::SentencePieceProcessor*>(h);
}

std::string message(const sentencepiece::util::Status& s) { return s.ok() ? std::string() : s.ToString(); }

std::string load(std::string_view bytes, void** handle) {
  auto p = std::make_unique<sentencepiece::SentencePieceProcessor>();
  std::string err = message(p->LoadFromSerializedProto(bytes));
  if (err.empty()) *handle = p.release();
  return err;
}

void release(void* h) { delete static_cast<sentencepiece::SentencePieceProcessor*>(h); }

std::string encode(const void* h, std::string_view text, std::vector<int>* ids) { return message(sp(h).Encode(text, ids)); }

std::string decode(const void* h, const std::vector<int>& ids, std::string* text) { return message(sp(h).Decode(ids, text)); }

int piece_size(const void* h) { return sp(h).GetPieceSize(); }
const std::string& id_to_piece(const void* h, int id) { return sp(h).IdToPiece(id); }
int piece_to_id(const void* h, std::string_view piece) { return sp(h).PieceToId(piece); }
int special_id(const void* h, int which) {
  switch (which) {
    case 0: return sp(h).unk_id();
    case 1: return sp(h).bos_id();
    case 2: return sp(h).eos_id();
    default: return sp(h).pad_id();
  }
}
bool is_control(const void* h, int id) { return sp(h).IsControl(id); }

std::string train(const std::unordered_map<std::string, std::string>& options, std::string* model_bytes) {
  return message(sentencepiece::SentencePieceTrainer::Train(options, nullptr, model_bytes));
}

const SentencePieceApi kApi{loom::data::detail::kSentencePieceApiVersion,
                            load,
                            release,
                            encode,
                            decode,
                            piece_size,
                            id_to_piece,
                            piece_to_id,
                            special_id,
                            is_control,
                            train};

}  // namespace

extern "C" __attribute__((visibility("default"))) const SentencePieceApi* loom_sentencepiece_api() { return &kApi; }
