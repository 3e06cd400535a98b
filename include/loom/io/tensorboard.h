#pragma once
// TensorBoard's event files, written so that TensorBoard (and anything reading its format)
// shows Loom's learning curves and weight histograms:
//
//   io::SummaryWriter w("logs/run1");             // creates logs/run1/events.out.tfevents.*
//   w.add_scalar("loss", 0.31, /*step=*/4);
//   w.add_histogram("dense_1/weights", dense.state().get("weights"), 4);
//
// The file is a sequence of records (a little-endian uint64 length, the masked CRC-32C of those
// 8 bytes, the bytes, their masked CRC-32C), each an `Event` protocol buffer: the first carries
// the file version "brain.Event:2", the others a wall time, a step and a `Summary` of one value.
// Values are appended and flushed to the operating system after each call, so a crashed program
// leaves every value written before it; train::TensorBoardLogger writes them from Model::fit.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::io {

class LOOM_API SummaryWriter {
 public:
  // Creates `log_dir` (and its parents) and a new event file in it named
  // "events.out.tfevents.<seconds>.<host>.<pid>.<n>" (TensorBoard reads every such file of a
  // folder as one run). IOError naming the folder when it cannot be created or written.
  explicit SummaryWriter(const std::string& log_dir);
  SummaryWriter(SummaryWriter&&) noexcept;
  SummaryWriter& operator=(SummaryWriter&&) noexcept;
  ~SummaryWriter();

  // One value of the series `tag` at `step`. `wall_time` in seconds since the Unix epoch
  // (0: now). ValueError for an empty tag or one that is not UTF-8.
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = 0);
  // The distribution of `values` (any shape, floating or integer dtype) at `step`: count, min,
  // max, sum, sum of squares and `bins` equal-width buckets between min and max, over the finite
  // values (NaNs and infinities are skipped). ValueError for no finite value or bins outside
  // 1..10000.
  void add_histogram(const std::string& tag, const Tensor& values, int64_t step, double wall_time = 0, int64_t bins = 30);
  void add_histogram(const std::string& tag, const std::vector<double>& values, int64_t step, double wall_time = 0,
                     int64_t bins = 30);
  // Flushes to the operating system (every add_ does this too; kept for symmetry with peers).
  void flush();
  const std::string& path() const;  // the event file

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::io
