#pragma once
// A Keras-style progress display: epoch, step/steps, running loss and metrics, samples/s and
// the time left. On a terminal it redraws one line; otherwise (a log file, CI) it prints a
// plain line every `every` steps and at the end of each epoch.
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/api.h"

namespace loom::train {

class LOOM_API ProgressBar {
 public:
  explicit ProgressBar(std::FILE* out = stdout, int every = 100);
  // Whether `out` is a terminal (decided once, at construction).
  bool interactive() const { return tty_; }

  void start_epoch(int epoch, int epochs, int64_t steps);
  // After each step: the samples it covered and the current running values (name, value).
  void update(int64_t step, int64_t samples, const std::vector<std::pair<std::string, double>>& values);
  // Ends the epoch's line with the final values (e.g. including validation results).
  void end_epoch(const std::vector<std::pair<std::string, double>>& values);

  // The text of one status line (exposed for tests).
  std::string line(int64_t step, const std::vector<std::pair<std::string, double>>& values, bool final) const;

 private:
  std::FILE* out_;
  int every_;
  bool tty_;
  int epoch_ = 0, epochs_ = 0;
  int64_t steps_ = 0, samples_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace loom::train
