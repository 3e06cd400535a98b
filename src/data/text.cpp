#include "loom/data/text.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>

#include "data/gz_file.h"
#include "loom/core/describe.h"
#include "loom/core/file.h"
#include "loom/core/index.h"
#include "loom/ops/creation.h"

namespace loom::data {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

template <typename F>
void for_each_token(const std::string& text, F&& f) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    if (j > i) f(std::string_view(text).substr(i, j - i));
    i = j;
  }
}

Vocabulary build(const std::unordered_map<std::string, int64_t>& counts, const VocabularyOptions& o, Vocabulary v,
                 void (*add)(Vocabulary&, const std::string&)) {
  std::vector<std::pair<std::string, int64_t>> items;
  for (const auto& [tok, n] : counts)
    if (n >= o.min_count && !v.contains(tok)) items.emplace_back(tok, n);
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  for (const auto& [tok, n] : items) {
    if (o.max_size > 0 && v.size() >= o.max_size) break;
    add(v, tok);
  }
  return v;
}

}  // namespace

std::vector<std::string> split_tokens(const std::string& text) {
  std::vector<std::string> out;
  for_each_token(text, [&](std::string_view t) { out.emplace_back(t); });
  return out;
}

Vocabulary::Vocabulary() {
  add(kPad);
  add(kUnk);
  add(kEos);
}

void Vocabulary::add(const std::string& token) {
  if (ids_.count(token)) return;
  ids_.emplace(token, size());
  tokens_.push_back(token);
}

static void check_options(const VocabularyOptions& o) {
  if (o.min_count < 1) throw ValueError("Vocabulary: min_count must be >= 1, got " + std::to_string(o.min_count));
  if (o.max_size != 0 && o.max_size < 3)
    throw ValueError("Vocabulary: max_size must be 0 (no limit) or >= 3 (the specials), got " + std::to_string(o.max_size));
}

Vocabulary Vocabulary::from_tokens(const std::vector<std::string>& tokens, const VocabularyOptions& o) {
  check_options(o);
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& t : tokens) ++counts[t];
  return build(counts, o, Vocabulary(), [](Vocabulary& v, const std::string& t) { v.add(t); });
}

Vocabulary Vocabulary::from_file(const std::string& path, const VocabularyOptions& o) {
  check_options(o);
  const std::string text = detail::read_maybe_gzip(path, "Vocabulary::from_file");
  std::unordered_map<std::string, int64_t> counts;
  for_each_token(text, [&](std::string_view t) { ++counts[std::string(t)]; });
  return build(counts, o, Vocabulary(), [](Vocabulary& v, const std::string& t) { v.add(t); });
}

Vocabulary Vocabulary::load(const std::string& path) {
  const std::string text = read_file(path);
  Vocabulary v;
  size_t pos = 0;
  int64_t line = 0;
  std::vector<std::string> lines;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    lines.push_back(text.substr(pos, e - pos));
    pos = e + 1;
  }
  for (const std::string& tok : lines) {
    ++line;
    if (tok.empty() || std::any_of(tok.begin(), tok.end(), is_space))
      throw IOError("Vocabulary::load: '" + path + "' line " + std::to_string(line) + ": a token is empty or holds whitespace");
    if (line <= 3) {
      if (tok != v.tokens_[static_cast<size_t>(line - 1)])
        throw IOError("Vocabulary::load: '" + path + "' line " + std::to_string(line) + ": expected the special token '" +
                      v.tokens_[static_cast<size_t>(line - 1)] + "', found '" + tok + "'");
      continue;
    }
    if (v.contains(tok)) throw IOError("Vocabulary::load: '" + path + "' line " + std::to_string(line) + ": duplicate token '" + tok + "'");
    v.add(tok);
  }
  if (line < 3) throw IOError("Vocabulary::load: '" + path + "' lacks the special tokens <pad>, <unk>, <eos> on its first lines");
  return v;
}

void Vocabulary::save(const std::string& path) const {
  std::string out;
  for (const auto& t : tokens_) out += t + "\n";
  write_file_atomic(path, out);
}

int64_t Vocabulary::id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? kUnkId : it->second;
}

const std::string& Vocabulary::token(int64_t id) const {
  if (id < 0 || id >= size())
    throw IndexError("Vocabulary::token: id " + std::to_string(id) + " is outside [0, " + std::to_string(size()) + ")");
  return tokens_[static_cast<size_t>(id)];
}

Tensor Vocabulary::encode(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) ids.push_back(id(t));
  return from_vector(ids, Shape{static_cast<int64_t>(ids.size())}, Device::cpu());
}

std::vector<std::string> Vocabulary::decode(const Tensor& ids) const {
  std::vector<std::string> out;
  for (int64_t i : ids.astype(Int64).to_vector<int64_t>()) out.push_back(token(i));
  return out;
}

Tensor tokenize_file(const std::string& path, const Vocabulary& vocab, bool add_eos) {
  const std::string text = detail::read_maybe_gzip(path, "tokenize_file");
  std::vector<int64_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    const std::string line = text.substr(pos, e - pos);
    bool any = false;
    for_each_token(line, [&](std::string_view t) {
      ids.push_back(vocab.id(std::string(t)));
      any = true;
    });
    if (add_eos && any) ids.push_back(Vocabulary::kEosId);
    pos = e + 1;
  }
  return from_vector(ids, Shape{static_cast<int64_t>(ids.size())}, Device::cpu());
}

Tensor batchify(const Tensor& ids, int64_t batch_size) {
  if (!ids.defined() || ids.ndim() != 1)
    throw ShapeError("batchify: ids must be 1-D, got shape " + (ids.defined() ? shape_str(ids.shape()) : std::string("(undefined)")));
  if (batch_size < 1) throw ValueError("batchify: batch_size must be >= 1, got " + std::to_string(batch_size));
  const int64_t len = ids.dim(0) / batch_size;
  if (len == 0)
    throw ValueError("batchify: " + std::to_string(ids.dim(0)) + " ids are too few for " + std::to_string(batch_size) + " rows");
  return ids.index({Slice(0, len * batch_size)}).reshape({batch_size, len});
}

SequenceBatcher::SequenceBatcher(const Tensor& ids, int64_t batch_size, int64_t steps) : rows_(batchify(ids, batch_size)), steps_(steps) {
  if (steps < 1) throw ValueError("SequenceBatcher: steps must be >= 1, got " + std::to_string(steps));
  n_windows_ = (rows_.dim(1) - 1) / steps;
  if (n_windows_ == 0)
    throw ValueError("SequenceBatcher: rows of " + std::to_string(rows_.dim(1)) + " ids hold no window of " + std::to_string(steps) +
                     " steps plus a target");
}

Example SequenceBatcher::get(int64_t i) const {
  if (i < 0 || i >= n_windows_)
    throw IndexError("SequenceBatcher::get: window " + std::to_string(i) + " is outside [0, " + std::to_string(n_windows_) + ")");
  const int64_t s = i * steps_;
  return {rows_.index({Slice(), Slice(s, s + steps_)}), rows_.index({Slice(), Slice(s + 1, s + steps_ + 1)})};
}

void write_token_file(const std::string& path, const std::vector<int32_t>& ids, TokenWidth width) {
  const size_t w = static_cast<size_t>(width);
  const int64_t limit = width == TokenWidth::UInt16 ? 65535 : INT32_MAX;
  std::string bytes(ids.size() * w, '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id > limit)
      throw ValueError("write_token_file: id " + std::to_string(id) + " at position " + std::to_string(i) + " does not fit " +
                       (w == 2 ? "UInt16 (valid: 0 to 65535)" : "UInt32 (valid: 0 to 2^31 - 1)"));
    for (size_t b = 0; b < w; ++b) bytes[i * w + b] = static_cast<char>((static_cast<uint32_t>(id) >> (8 * b)) & 0xFF);
  }
  write_file_atomic(path, bytes);
}

Tensor read_token_file(const std::string& path, TokenWidth width) {
  const char* op = "read_token_file";
  const size_t w = static_cast<size_t>(width);
  RegularFile f(path, op);
  if (f.size() % w != 0)
    throw ValueError(std::string(op) + ": '" + path + "' has " + std::to_string(f.size()) + " bytes, not a multiple of " +
                     std::to_string(w) + " (" + (w == 2 ? "UInt16" : "UInt32") + " ids): the file ends inside an id, or the width is wrong");
  const int64_t n = static_cast<int64_t>(f.size() / w);
  Tensor ids = empty({n}, Int32);
  int32_t* out = ids.data<int32_t>();
  // read in blocks straight into the tensor: the file is never held twice in memory
  std::vector<unsigned char> block(std::min<uint64_t>(f.size(), 1 << 20) + 1);
  int64_t done = 0;
  while (done < n) {
    const size_t want = std::min<size_t>((block.size() - 1) / w, static_cast<size_t>(n - done)) * w;
    size_t got = 0;
    while (got < want) {
      const ssize_t r = ::read(f.fd(), block.data() + got, want - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw IOError(std::string(op) + ": '" + path + "' ended or failed after " + std::to_string(done * w + got) + " of " +
                      std::to_string(f.size()) + " bytes" + (r < 0 ? std::string(" (") + std::strerror(errno) + ")" : ""));
      got += static_cast<size_t>(r);
    }
    for (size_t k = 0; k < want / w; ++k) {
      const unsigned char* p = block.data() + k * w;
      const uint32_t v = w == 2 ? (p[0] | (p[1] << 8)) : (p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24));
      if (v > static_cast<uint32_t>(INT32_MAX))
        throw ValueError(std::string(op) + ": '" + path + "' holds id " + std::to_string(v) + " at position " + std::to_string(done + k) +
                         " (valid: 0 to 2^31 - 1)");
      out[done + k] = static_cast<int32_t>(v);
    }
    done += static_cast<int64_t>(want / w);
  }
  return ids;
}

TokenWindows::TokenWindows(Tensor ids, int64_t steps, int64_t stride) : ids_(std::move(ids)), steps_(steps), stride_(stride ? stride : steps) {
  if (!ids_.defined() || ids_.ndim() != 1 || !is_integral(ids_.dtype()))
    throw ValueError("TokenWindows: ids must be a 1-D integer tensor, got " + (ids_.defined() ? describe(ids_) : std::string("an undefined tensor")));
  if (steps < 1) throw ValueError("TokenWindows: steps must be >= 1, got " + std::to_string(steps));
  if (stride < 0) throw ValueError("TokenWindows: stride must be >= 0 (0: steps), got " + std::to_string(stride));
  const int64_t n = ids_.dim(0);
  if (n < steps + 1)
    throw ValueError("TokenWindows: " + std::to_string(n) + " ids hold no window of " + std::to_string(steps) +
                     " steps (valid: at least steps + 1 = " + std::to_string(steps + 1) + " ids: the inputs and the target after the last)");
  n_windows_ = (n - steps - 1) / stride_ + 1;
}

TokenWindows::TokenWindows(const std::string& path, TokenWidth width, int64_t steps, int64_t stride)
    : TokenWindows(read_token_file(path, width), steps, stride) {}

Example TokenWindows::get(int64_t i) const {
  if (i < 0 || i >= n_windows_)
    throw IndexError("TokenWindows::get: window " + std::to_string(i) + " is outside [0, " + std::to_string(n_windows_) + ")");
  const int64_t s = i * stride_;
  return {ids_.index({Slice(s, s + steps_)}), ids_.index({Slice(s + 1, s + steps_ + 1)})};
}

}  // namespace loom::data
