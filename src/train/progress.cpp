#include "loom/train/progress.h"

#include <unistd.h>

#include <cmath>

namespace loom::train {

namespace {

std::string duration(double s) {
  char b[32];
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  if (t >= 3600) std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  return b;
}

}  // namespace

ProgressBar::ProgressBar(std::FILE* out, int every) : out_(out), every_(every < 1 ? 1 : every), tty_(::isatty(::fileno(out)) != 0) {}

void ProgressBar::start_epoch(int epoch, int epochs, int64_t steps) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps;
  samples_ = 0;
  start_ = std::chrono::steady_clock::now();
}

std::string ProgressBar::line(int64_t step, const std::vector<std::pair<std::string, double>>& values, bool final) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char head[64];
  std::snprintf(head, sizeof head, "Epoch %d/%d ", epoch_, epochs_);
  std::string s = head;
  constexpr int kWidth = 24;
  const int filled = steps_ > 0 ? static_cast<int>(kWidth * step / steps_) : kWidth;
  s += "[" + std::string(static_cast<size_t>(filled), '=') + (filled < kWidth ? ">" : "") +
       std::string(static_cast<size_t>(std::max(0, kWidth - filled - 1)), '.') + "] ";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%lld/%lld", static_cast<long long>(step), static_cast<long long>(steps_));
  s += buf;
  for (const auto& [k, v] : values) {
    std::snprintf(buf, sizeof buf, "  %s %.4f", k.c_str(), v);
    s += buf;
  }
  const double rate = elapsed > 0 ? static_cast<double>(samples_) / elapsed : 0;
  std::snprintf(buf, sizeof buf, "  %.0f samples/s", rate);
  s += buf;
  if (final) {
    s += "  " + duration(elapsed);
  } else {
    const double left = step > 0 ? elapsed * static_cast<double>(steps_ - step) / static_cast<double>(step) : NAN;
    s += "  ETA " + duration(left);
  }
  return s;
}

void ProgressBar::update(int64_t step, int64_t samples, const std::vector<std::pair<std::string, double>>& values) {
  samples_ += samples;
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K", line(step, values, false).c_str());
    std::fflush(out_);
  } else if (step % every_ == 0 && step < steps_) {
    std::fprintf(out_, "%s\n", line(step, values, false).c_str());
    std::fflush(out_);
  }
}

void ProgressBar::end_epoch(const std::vector<std::pair<std::string, double>>& values) {
  std::fprintf(out_, tty_ ? "\r%s\033[K\n" : "%s\n", line(steps_, values, true).c_str());
  std::fflush(out_);
}

}  // namespace loom::train
