#pragma once
// Datasets: random-access collections of examples (an example is a vector of tensors, e.g.
// {image, label}) and streams of examples for sources without random access.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::data {

// One example or one batch: a tensor per field ({image, label}, {input, target}, ...).
using Example = std::vector<Tensor>;
using Batch = std::vector<Tensor>;

// Stacks examples field by field into a batch: field k of the batch is stack(ex[k] for ex)
// along a new leading axis. Throws ShapeError naming the field and the first mismatching
// example when shapes or field counts differ, ValueError when `examples` is empty.
LOOM_API Batch collate(const std::vector<Example>& examples);

// A random-access dataset. get() and get_batch() are const and may be called concurrently from
// the loader's worker threads; implementations must not mutate shared state without locking.
class LOOM_API Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Example i, 0 <= i < size(); throws IndexError otherwise.
  virtual Example get(int64_t i) const = 0;
  // The examples at `indices` collated into a batch. The default calls get() per index and
  // collate(); TensorDataset and Subset override it with one take() per field.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
};

// Examples are slices along axis 0 of stacked tensors (all with the same leading size):
// get(i) returns views t[i] (no copy); get_batch gathers with one take() per field.
class LOOM_API TensorDataset : public Dataset {
 public:
  explicit TensorDataset(std::vector<Tensor> tensors);
  int64_t size() const override { return size_; }
  Example get(int64_t i) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

// The examples of `base` at `indices` (in that order), sharing the base dataset.
class LOOM_API Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t i) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<int64_t>& indices() const { return indices_; }
  const std::shared_ptr<const Dataset>& base() const { return base_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

// Splits `dataset` into disjoint subsets of the given lengths (which must sum to its size)
// after a seeded permutation: the same seed gives the same split.
LOOM_API std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths, uint64_t seed);
// Fractions that sum to 1; sizes are floor(fraction * size) with the remainder given to the
// first subsets one by one (as torch.utils.data.random_split).
LOOM_API std::vector<std::shared_ptr<Subset>> random_split_fractions(std::shared_ptr<const Dataset> dataset,
                                                            const std::vector<double>& fractions, uint64_t seed);

// A source of examples without random access (a socket, a generator, a huge file read in one
// pass). next() returns std::nullopt at the end; reset() starts again where the source allows.
class LOOM_API ExampleStream {
 public:
  virtual ~ExampleStream() = default;
  virtual std::optional<Example> next() = 0;
  // Starts the stream over; throws ValueError when the source cannot restart (the default).
  virtual void reset();
};

// A stream over a function: next() calls fn until it returns std::nullopt.
class LOOM_API FunctionStream : public ExampleStream {
 public:
  explicit FunctionStream(std::function<std::optional<Example>()> fn) : fn_(std::move(fn)) {}
  std::optional<Example> next() override;

 private:
  std::function<std::optional<Example>()> fn_;
  bool done_ = false;
};

// The examples of a dataset in order, as a stream.
class LOOM_API DatasetStream : public ExampleStream {
 public:
  explicit DatasetStream(std::shared_ptr<const Dataset> dataset) : dataset_(std::move(dataset)) {}
  std::optional<Example> next() override;
  void reset() override { pos_ = 0; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  int64_t pos_ = 0;
};

// Groups a stream into collated batches of `batch_size` examples; the last, shorter batch is
// kept unless drop_last. next() returns std::nullopt at the end of the stream.
class LOOM_API StreamBatcher {
 public:
  StreamBatcher(std::shared_ptr<ExampleStream> stream, int64_t batch_size, bool drop_last = false);
  std::optional<Batch> next();

 private:
  std::shared_ptr<ExampleStream> stream_;
  int64_t batch_size_;
  bool drop_last_;
  bool done_ = false;
};

}  // namespace loom::data
