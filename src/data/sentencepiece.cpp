// SentencePieceTokenizer and train_sentencepiece: libloom's side of the module that links Debian's
// libsentencepiece (data/sentencepiece/api.h says why it is a module opened with RTLD_DEEPBIND).
#include <dlfcn.h>

#include <mutex>

#include "core/utf8.h"
#include "data/sentencepiece/api.h"
#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/data/tokenizer.h"

namespace loom::data {

namespace {

using detail::SentencePieceApi;

// A model file larger than this is refused before it is read (Llama 2's is 500 KB; the largest
// published ones are a few MB).
constexpr uint64_t kMaxModelBytes = 1ull << 30;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

struct Module {
  const SentencePieceApi* api = nullptr;
  std::string error;
};

// Opens the module once per process: first beside libloom.so (the build folder, or the install's
// lib folder), then by the loader's search path.
const Module& module() {
  static const Module m = [] {
    Module r;
    if (kSanitized) {
      r.error = "SentencePiece is not available in a build with AddressSanitizer: its module must be opened with "
                "RTLD_DEEPBIND (libsentencepiece's own protobuf would otherwise meet libloom's), which the sanitizer "
                "refuses";
      return r;
    }
    std::string beside;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&module), &info) && info.dli_fname) {
      beside = info.dli_fname;
      const size_t slash = beside.rfind('/');
      beside = slash == std::string::npos ? std::string() : beside.substr(0, slash + 1) + detail::kSentencePieceModule;
    }
    void* h = nullptr;
    std::string tried;
    for (const std::string& path : {beside, std::string(detail::kSentencePieceModule)}) {
      if (path.empty()) continue;
      h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (h) break;
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(e ? e : path);
    }
    if (!h) {
      r.error = std::string("SentencePiece's module ") + detail::kSentencePieceModule +
                " could not be opened (" + tried + "); it is built with libloom and needs Debian's libsentencepiece0";
      return r;
    }
    using Entry = const SentencePieceApi* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(h, detail::kSentencePieceEntry));
    const SentencePieceApi* api = entry ? entry() : nullptr;
    if (!api || api->version != detail::kSentencePieceApiVersion) {
      r.error = std::string(detail::kSentencePieceModule) + " is not the one built with this libloom (its entry point or version differs)";
      return r;
    }
    r.api = api;
    return r;
  }();
  return m;
}

const SentencePieceApi& api() {
  const Module& m = module();
  if (!m.api) throw Error("SentencePieceTokenizer: " + m.error);
  return *m.api;
}

}  // namespace

struct detail::SentencePieceImpl {
  const SentencePieceApi* api = nullptr;
  void* handle = nullptr;
  int32_t size = 0;
  ~SentencePieceImpl() {
    if (handle) api->release(handle);
  }
  void check_id(int32_t id, const char* op) const {
    if (id < 0 || id >= size)
      throw IndexError(std::string("SentencePieceTokenizer::") + op + ": id " + std::to_string(id) +
                       " is out of range (valid: 0 to " + std::to_string(size - 1) + ")");
  }
};

bool SentencePieceTokenizer::available(std::string* why) {
  const Module& m = module();
  if (!m.api && why) *why = m.error;
  return m.api != nullptr;
}

SentencePieceTokenizer SentencePieceTokenizer::from_bytes(std::string_view model_bytes, const std::string& origin) {
  const SentencePieceApi& a = api();
  auto impl = std::make_shared<detail::SentencePieceImpl>();
  impl->api = &a;
  const std::string err = a.load(model_bytes, &impl->handle);
  if (!err.empty())
    throw ValueError("SentencePieceTokenizer: " + origin + " is not a SentencePiece model sentencepiece loads (" + err + ")");
  impl->size = a.piece_size(impl->handle);
  return SentencePieceTokenizer(std::move(impl));
}

SentencePieceTokenizer SentencePieceTokenizer::load(const std::string& path) {
  {
    RegularFile f(path, "SentencePieceTokenizer::load");
    if (f.size() > kMaxModelBytes)
      throw ValueError("SentencePieceTokenizer::load: '" + path + "' has " + std::to_string(f.size()) +
                       " bytes; a SentencePiece model has at most " + std::to_string(kMaxModelBytes));
  }
  return from_bytes(read_file(path), "'" + path + "'");
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_bos, bool add_eos) const {
  std::vector<int> ids;
  const std::string err = impl_->api->encode(impl_->handle, text, &ids);
  if (!err.empty()) throw ValueError("SentencePieceTokenizer::encode: sentencepiece refused the text (" + err + ")");
  std::vector<int32_t> out;
  out.reserve(ids.size() + 2);
  if (add_bos && bos_id() >= 0) out.push_back(bos_id());
  out.insert(out.end(), ids.begin(), ids.end());
  if (add_eos && eos_id() >= 0) out.push_back(eos_id());
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  for (int32_t id : ids) impl_->check_id(id, "decode");
  std::string text;
  const std::string err = impl_->api->decode(impl_->handle, std::vector<int>(ids.begin(), ids.end()), &text);
  if (!err.empty()) throw ValueError("SentencePieceTokenizer::decode: sentencepiece refused the ids (" + err + ")");
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->size; }

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view piece) const {
  const int id = impl_->api->piece_to_id(impl_->handle, piece);
  if (id == unk_id() && piece != id_to_token(id)) return std::nullopt;
  return id;
}

const std::string& SentencePieceTokenizer::id_to_token(int32_t id) const {
  impl_->check_id(id, "id_to_token");
  return impl_->api->id_to_piece(impl_->handle, id);
}

int32_t SentencePieceTokenizer::unk_id() const { return impl_->api->special_id(impl_->handle, 0); }
int32_t SentencePieceTokenizer::bos_id() const { return impl_->api->special_id(impl_->handle, 1); }
int32_t SentencePieceTokenizer::eos_id() const { return impl_->api->special_id(impl_->handle, 2); }
int32_t SentencePieceTokenizer::pad_id() const { return impl_->api->special_id(impl_->handle, 3); }

void train_sentencepiece(const std::string& corpus_path, const std::string& model_path, const SentencePieceTrainOptions& o) {
  const char* op = "train_sentencepiece";
  { RegularFile f(corpus_path, op); }  // a FIFO or a device would block or never end
  if (o.vocab_size < 2)
    throw ValueError(std::string(op) + ": vocab_size must be at least 2, got " + std::to_string(o.vocab_size));
  if (!(o.character_coverage > 0 && o.character_coverage <= 1))
    throw ValueError(std::string(op) + ": character_coverage must be in (0, 1], got " + std::to_string(o.character_coverage));
  if (o.num_threads < 1 || o.num_threads > 1024)
    throw ValueError(std::string(op) + ": num_threads must be in [1, 1024], got " + std::to_string(o.num_threads));
  if (o.max_sentence_length < 1)
    throw ValueError(std::string(op) + ": max_sentence_length must be at least 1, got " + std::to_string(o.max_sentence_length));
  std::unordered_map<std::string, std::string> flags{
      {"input", corpus_path},
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"max_sentence_length", std::to_string(o.max_sentence_length)},
      {"num_threads", std::to_string(o.num_threads)},
      // every line of the corpus, in order: the same corpus gives the same model
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"minloglevel", "2"},  // sentencepiece's progress log to stderr: errors only
  };
  for (const auto& [k, v] : o.extra) {
    if (k == "input" || k == "model_prefix")
      throw ValueError(std::string(op) + ": the flag \"" + k + "\" is set by train_sentencepiece's arguments (corpus_path, model_path)");
    flags[k] = v;
  }
  std::string model;
  const std::string err = api().train(flags, &model);
  if (!err.empty()) throw ValueError(std::string(op) + ": sentencepiece's trainer refused (" + err + ") on '" + corpus_path + "'");
  write_file_atomic(model_path, model);
}

}  // namespace loom::data
