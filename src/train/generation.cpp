#include "loom/train/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"

namespace loom::train {

namespace {

void check(const SamplingOptions& o) {
  const auto bad = [](const std::string& what) { throw ValueError("sample_token: " + what); };
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) bad("temperature " + std::to_string(o.temperature) + " (valid: 0 for greedy, or > 0)");
  if (o.top_k < 0) bad("top_k " + std::to_string(o.top_k) + " (valid: 0 for all, or >= 1)");
  if (!(o.top_p > 0 && o.top_p <= 1)) bad("top_p " + std::to_string(o.top_p) + " (valid: in (0, 1])");
  if (!(o.min_p >= 0 && o.min_p <= 1)) bad("min_p " + std::to_string(o.min_p) + " (valid: in [0, 1])");
  if (!(o.repetition_penalty > 0) || !std::isfinite(o.repetition_penalty))
    bad("repetition_penalty " + std::to_string(o.repetition_penalty) + " (valid: > 0; 1 for none)");
}

// A uniform double in [0, 1) from one draw of the generator: its 53 high bits.
double uniform01(Generator& g) { return static_cast<double>(g.next_key() >> 11) * 0x1.0p-53; }

}  // namespace

int64_t sample_token(const Tensor& logits, const SamplingOptions& o, const std::vector<int64_t>& history, Generator& generator) {
  check(o);
  if (!logits.defined() || logits.ndim() != 1 || logits.numel() < 1 || !is_floating(logits.dtype()))
    throw ValueError("sample_token: logits must be a 1-d floating tensor (vocab,) of at least one value, got " +
                     (logits.defined() ? shape_str(logits.shape()) + " " + dtype_name(logits.dtype()) : std::string("an undefined tensor")));
  const int64_t n = logits.numel();
  std::vector<double> z = logits.astype(Float64).contiguous().to_vector<double>();
  if (o.repetition_penalty != 1) {
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t id : history)
      if (id >= 0 && id < n && !seen[id]) {
        seen[id] = true;
        z[id] = z[id] > 0 ? z[id] / o.repetition_penalty : z[id] * o.repetition_penalty;
      }
  }
  if (o.temperature == 0) return std::max_element(z.begin(), z.end()) - z.begin();  // the first of equal maxima

  // candidates by decreasing logit (ties: lower id first), with their probabilities
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, n) : n;
  const auto by_logit = [&](int64_t a, int64_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_logit);
  const double top = z[order[0]] / o.temperature;
  if (!std::isfinite(top)) throw ValueError("sample_token: the largest logit is not finite (" + std::to_string(z[order[0]]) + ")");
  std::vector<double> p(static_cast<size_t>(keep));
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[i] = std::exp(z[order[i]] / o.temperature - top);
  for (double& v : p) v /= total;
  if (o.top_p < 1) {  // the smallest prefix reaching top_p (at least one token)
    double c = 0;
    int64_t i = 0;
    while (i < keep && (i == 0 || c < o.top_p)) c += p[i++];
    keep = i;
  }
  if (o.min_p > 0) {  // at least min_p times the most probable token's probability
    const double floor = o.min_p * p[0];
    int64_t i = 1;
    while (i < keep && p[i] >= floor) ++i;
    keep = i;
  }
  total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[i];
  const double u = uniform01(generator) * total;
  double c = 0;
  for (int64_t i = 0; i < keep; ++i) {
    c += p[i];
    if (u < c) return order[i];
  }
  return order[keep - 1];  // rounding at the end of the sum
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  // the length of a character from its first byte; 0 for a byte that starts none
  const auto length = [](unsigned char b) -> size_t { return b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0; };
  size_t i = 0, cut = 0;
  while (i < pending_.size()) {
    const size_t len = length(static_cast<unsigned char>(pending_[i]));
    if (len == 0) {  // a stray byte: passed through
      cut = ++i;
      continue;
    }
    size_t k = 1;
    while (k < len && i + k < pending_.size() && (static_cast<unsigned char>(pending_[i + k]) & 0xC0) == 0x80) ++k;
    if (k == len) {
      cut = i += len;
    } else if (i + k == pending_.size()) {
      break;  // a character whose last bytes have not come yet
    } else {
      cut = i += k;  // a broken character: its bytes as they are
    }
  }
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

RecomputingModel::RecomputingModel(zoo::Network network, int64_t pad_id) : network_(std::move(network)), pad_id_(pad_id) {
  if (network_.inputs.size() != 1)
    throw ValueError("RecomputingModel: the network must have one input, ids (1, T); it has " + std::to_string(network_.inputs.size()));
  const Shape& in = network_.inputs[0].shape();
  if (in.size() != 2 || !is_integral(network_.inputs[0].dtype()))
    throw ValueError("RecomputingModel: the network's input must be integer ids (batch, T), got " + shape_str(in) + " " +
                     dtype_name(network_.inputs[0].dtype()));
  window_ = in[1];
}

Tensor RecomputingModel::feed(const std::vector<int64_t>& tokens) {
  if (tokens.empty()) throw ValueError("RecomputingModel::feed: no tokens (feed at least one)");
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  const auto n = static_cast<int64_t>(tokens_.size());
  const int64_t from = window_ > 0 ? std::max<int64_t>(0, n - window_) : 0;
  const int64_t length = window_ > 0 ? window_ : n;
  std::vector<int64_t> ids(static_cast<size_t>(length), pad_id_);
  std::copy(tokens_.begin() + from, tokens_.end(), ids.begin());
  NoGrad no_grad;
  const Tensor logits = network_(from_vector<int64_t>(ids, {1, length}));
  if (logits.ndim() != 3 || logits.shape()[0] != 1 || logits.shape()[1] != length)
    throw ValueError("RecomputingModel: the network must answer logits (1, T, vocab) for ids (1, T), got " + shape_str(logits.shape()));
  return logits[0][n - from - 1];
}

namespace {

void check(const GenerationOptions& o, const std::vector<int64_t>& prompt, bool can_decode) {
  const auto bad = [](const std::string& what) { throw ValueError("generate: " + what); };
  if (prompt.empty()) bad("the prompt has no tokens (give at least one, e.g. the model's begin-of-text token)");
  if (o.max_new_tokens < 0) bad("max_new_tokens " + std::to_string(o.max_new_tokens) + " (valid: >= 0)");
  if (!o.stop_strings.empty() && !can_decode) bad("stop strings need a decode function (the tokenizer's) to read the text");
  for (const std::string& s : o.stop_strings)
    if (s.empty()) bad("an empty stop string (each must have at least one byte)");
  check(o.sampling);
}

// Where `text` is cut for the first stop string it holds that ends past byte `searched` (the
// length before the newest bytes: a stop may straddle them); npos when none does.
size_t stop_at(const std::string& text, size_t searched, const std::vector<std::string>& stops) {
  size_t cut = std::string::npos;
  for (const std::string& s : stops) {
    const size_t at = text.find(s, searched >= s.size() ? searched - s.size() + 1 : 0);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  return cut;
}

// The bytes of decoded text that later tokens cannot change: all but a trailing run of U+FFFD,
// which a decoder writes for a character whose last bytes have not come yet.
size_t settled(const std::string& text) {
  size_t n = text.size();
  while (n >= 3 && text.compare(n - 3, 3, "\xEF\xBF\xBD") == 0) n -= 3;
  return n;
}

// The text the tokens add to what `window.given` holds, through `stream`. Only the tokens from
// `window.start` on are decoded, not the whole generation each step (which grew with the square
// of its length): a decoder may write a token differently at the start of a text (SentencePiece
// drops the first piece's space), so the window keeps a few settled tokens before the new ones
// and the new text is what decoding the window adds to decoding its settled part.
std::string new_text(const DecodeFn& decode, const std::vector<int64_t>& tokens, GenerationState::DecodeWindow& window,
                     Utf8Stream& stream, bool last) {
  constexpr size_t kContext = 6;  // settled tokens kept before the new ones
  const std::vector<int64_t> span(tokens.begin() + static_cast<std::ptrdiff_t>(window.start), tokens.end());
  const std::string text = decode(span);
  const std::string& given = window.given;
  const size_t end = last ? text.size() : settled(text);
  if (end <= given.size() || text.compare(0, given.size(), given) != 0) return last ? stream.finish() : std::string();
  std::string out = stream.push(std::string_view(text).substr(given.size(), end - given.size()));
  if (end == text.size() && tokens.size() > window.start + 2 * kContext) {
    // every token's text is out: the window moves up to the last few
    window.start = tokens.size() - kContext;
    window.given = decode(std::vector<int64_t>(tokens.end() - static_cast<std::ptrdiff_t>(kContext), tokens.end()));
  } else {
    window.given.assign(text, 0, end);
  }
  return last ? out + stream.finish() : out;
}

}  // namespace

// The bytes at the end of `text` that may begin a stop string: held back from the stream until
// the next tokens tell.
size_t held(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops)
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

GenerationState::GenerationState(std::vector<int64_t> prompt, GenerationOptions options, DecodeFn decode)
    : prompt_(std::move(prompt)), options_(std::move(options)), decode_(std::move(decode)), generator_(options_.seed) {
  check(options_, prompt_, static_cast<bool>(decode_));
  history_ = prompt_;
  done_ = options_.max_new_tokens == 0;
}

// out_.text's bytes not handed out yet, but those that may begin a stop string unless `all`.
std::string GenerationState::show(bool all) {
  const size_t end = all ? out_.text.size() : out_.text.size() - held(out_.text, options_.stop_strings);
  std::string text = end > shown_ ? out_.text.substr(shown_, end - shown_) : std::string();
  shown_ = std::max(shown_, end);
  return text;
}

GenerationState::Step GenerationState::next(const Tensor& logits) {
  if (done_) throw ValueError("GenerationState::next: the generation has ended (" + std::to_string(out_.tokens.size()) + " tokens)");
  const int64_t token = sample_token(logits, options_.sampling, history_, generator_);
  history_.push_back(token);
  const auto& stops = options_.stop_tokens;
  const bool stop_token = std::find(stops.begin(), stops.end(), token) != stops.end();
  const bool last = stop_token || static_cast<int64_t>(out_.tokens.size()) + 1 == options_.max_new_tokens;
  if (decode_ && !stop_token) {
    out_.tokens.push_back(token);
    const size_t searched = out_.text.size();
    out_.text += new_text(decode_, out_.tokens, window_, stream_, last);
    if (const size_t cut = stop_at(out_.text, searched, options_.stop_strings); cut != std::string::npos) {
      out_.text.resize(cut);
      out_.finish = Generation::Finish::StopString;
      done_ = true;
      return {token, show(true), true};
    }
  } else {
    if (decode_) out_.text += new_text(decode_, out_.tokens, window_, stream_, true);  // what the stop token leaves
    out_.tokens.push_back(token);
  }
  if (stop_token) out_.finish = Generation::Finish::StopToken;
  done_ = last;
  return {token, show(last), last};
}

std::string GenerationState::cancel() {
  if (out_.finish != Generation::Finish::StopString) out_.finish = Generation::Finish::Callback;
  done_ = true;
  if (decode_) out_.text += stream_.finish();
  return show(true);
}

Generation generate(NextTokenModel& model, const std::vector<int64_t>& prompt, const GenerationOptions& options,
                    const DecodeFn& decode, const OnToken& on_token) {
  GenerationState state(prompt, options, decode);
  model.reset();
  Tensor logits = model.feed(prompt);
  while (!state.done()) {
    const GenerationState::Step step = state.next(logits);
    if (on_token && !on_token(step.token, step.text)) {
      if (state.result().finish != Generation::Finish::StopString) state.cancel();  // a stop string had ended it anyway
      break;
    }
    if (!step.done) logits = model.feed({step.token});
  }
  return state.result();
}

}  // namespace loom::train
