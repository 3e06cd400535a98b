#pragma once
// The seam between libloom and libloom_sentencepiece.so, the module that links Debian's
// libsentencepiece (docs/text.md, "SentencePiece"). libsentencepiece carries its own copy of
// protobuf 3.14 and exports it, while libloom links the system's libprotobuf (3.21, for ONNX):
// loaded into one symbol scope, one protobuf's code runs against the other's and sentencepiece
// aborts on the version check. So libloom opens the module with dlopen(RTLD_LOCAL |
// RTLD_DEEPBIND), which resolves the module's and libsentencepiece's symbols in their own scope
// first, and calls it through this table alone. No protobuf type crosses it; the C++ standard
// library is the one both sides share.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::data::detail {

// Every call returns an empty string on success, else sentencepiece's message.
struct SentencePieceApi {
  int version;  // kSentencePieceApiVersion: the module and libloom were built together
  std::string (*load)(std::string_view model_bytes, void** handle);
  void (*release)(void* handle);
  std::string (*encode)(const void* handle, std::string_view text, std::vector<int>* ids);
  std::string (*decode)(const void* handle, const std::vector<int>& ids, std::string* text);
  int (*piece_size)(const void* handle);
  const std::string& (*id_to_piece)(const void* handle, int id);
  int (*piece_to_id)(const void* handle, std::string_view piece);  // unk_id when not a piece
  int (*special_id)(const void* handle, int which);                 // 0 unk, 1 bos, 2 eos, 3 pad (-1: none)
  bool (*is_control)(const void* handle, int id);
  std::string (*train)(const std::unordered_map<std::string, std::string>& options, std::string* model_bytes);
};

constexpr int kSentencePieceApiVersion = 1;
constexpr const char* kSentencePieceModule = "libloom_sentencepiece.so";
constexpr const char* kSentencePieceEntry = "loom_sentencepiece_api";

}  // namespace loom::data::detail
