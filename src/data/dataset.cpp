#include "loom/data/dataset.h"

#include <cmath>
#include <numeric>

#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/random.h"

namespace loom::data {

namespace {

Tensor index_tensor(const std::vector<int64_t>& indices) {
  return from_vector(indices, Shape{static_cast<int64_t>(indices.size())}, Device::cpu());
}

void check_index(int64_t i, int64_t n, const char* who) {
  if (i < 0 || i >= n)
    throw IndexError(std::string(who) + ": index " + std::to_string(i) + " is out of range for a dataset of " +
                     std::to_string(n) + " examples (valid: 0 to " + std::to_string(n - 1) + ")");
}

}  // namespace

Batch collate(const std::vector<Example>& examples) {
  if (examples.empty()) throw ValueError("collate: no examples to batch");
  const size_t fields = examples[0].size();
  for (size_t e = 1; e < examples.size(); ++e)
    if (examples[e].size() != fields)
      throw ShapeError("collate: example " + std::to_string(e) + " has " + std::to_string(examples[e].size()) +
                       " fields but example 0 has " + std::to_string(fields));
  Batch out;
  out.reserve(fields);
  std::vector<Tensor> column(examples.size());
  for (size_t f = 0; f < fields; ++f) {
    for (size_t e = 0; e < examples.size(); ++e) {
      const Tensor& t = examples[e][f];
      if (!t.defined()) throw ValueError("collate: field " + std::to_string(f) + " of example " + std::to_string(e) + " is undefined");
      if (t.shape() != examples[0][f].shape())
        throw ShapeError("collate: field " + std::to_string(f) + " has shape " + shape_str(t.shape()) + " in example " +
                         std::to_string(e) + " but " + shape_str(examples[0][f].shape()) +
                         " in example 0 (every example's field must have one shape to stack)");
      if (t.dtype() != examples[0][f].dtype())
        throw DTypeError("collate: field " + std::to_string(f) + " has dtype " + dtype_name(t.dtype()) + " in example " +
                         std::to_string(e) + " but " + dtype_name(examples[0][f].dtype()) + " in example 0");
      column[e] = t;
    }
    out.push_back(stack(column, 0));
  }
  return out;
}

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t i : indices) examples.push_back(get(i));
  return collate(examples);
}

// --- TensorDataset

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  if (tensors_.empty()) throw ValueError("TensorDataset: needs at least one tensor");
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    if (!t.defined()) throw ValueError("TensorDataset: tensor " + std::to_string(k) + " is undefined");
    if (t.ndim() == 0) throw ShapeError("TensorDataset: tensor " + std::to_string(k) + " is 0-d (examples are slices along axis 0)");
    if (t.dim(0) != tensors_[0].dim(0))
      throw ShapeError("TensorDataset: tensor " + std::to_string(k) + " has shape " + shape_str(t.shape()) + " but tensor 0 has " +
                       shape_str(tensors_[0].shape()) + " (all need the same size along axis 0)");
  }
  size_ = tensors_[0].dim(0);
}

Example TensorDataset::get(int64_t i) const {
  check_index(i, size_, "TensorDataset::get");
  Example ex;
  ex.reserve(tensors_.size());
  for (const Tensor& t : tensors_) ex.push_back(t[i]);
  return ex;
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) check_index(i, size_, "TensorDataset::get_batch");
  NoGrad no_grad;
  const Tensor idx = index_tensor(indices);
  Batch out;
  out.reserve(tensors_.size());
  for (const Tensor& t : tensors_) out.push_back(take(t, idx, 0));
  return out;
}

// --- Subset

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices) : base_(std::move(base)), indices_(std::move(indices)) {
  if (!base_) throw ValueError("Subset: the base dataset is null");
  const int64_t n = base_->size();
  for (int64_t i : indices_) check_index(i, n, "Subset");
}

Example Subset::get(int64_t i) const {
  check_index(i, size(), "Subset::get");
  return base_->get(indices_[static_cast<size_t>(i)]);
}

Batch Subset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices) {
    check_index(i, size(), "Subset::get_batch");
    mapped.push_back(indices_[static_cast<size_t>(i)]);
  }
  return base_->get_batch(mapped);
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset, const std::vector<int64_t>& lengths,
                                                  uint64_t seed) {
  if (!dataset) throw ValueError("random_split: the dataset is null");
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l < 0) throw ValueError("random_split: lengths must be >= 0, got " + std::to_string(l));
    total += l;
  }
  if (total != dataset->size())
    throw ValueError("random_split: lengths sum to " + std::to_string(total) + " but the dataset has " +
                     std::to_string(dataset->size()) + " examples");
  Generator gen(seed);
  const std::vector<int64_t> perm = permutation(total, Device::cpu(), &gen).to_vector<int64_t>();
  std::vector<std::shared_ptr<Subset>> out;
  int64_t start = 0;
  for (int64_t l : lengths) {
    out.push_back(std::make_shared<Subset>(dataset, std::vector<int64_t>(perm.begin() + start, perm.begin() + start + l)));
    start += l;
  }
  return out;
}

std::vector<std::shared_ptr<Subset>> random_split_fractions(std::shared_ptr<const Dataset> dataset,
                                                            const std::vector<double>& fractions, uint64_t seed) {
  if (!dataset) throw ValueError("random_split_fractions: the dataset is null");
  double sum = 0;
  for (double f : fractions) {
    if (!(f >= 0 && f <= 1)) throw ValueError("random_split_fractions: fractions must be in [0, 1], got " + std::to_string(f));
    sum += f;
  }
  if (std::abs(sum - 1.0) > 1e-6) throw ValueError("random_split_fractions: fractions sum to " + std::to_string(sum) + ", not 1");
  const int64_t n = dataset->size();
  std::vector<int64_t> lengths;
  int64_t used = 0;
  for (double f : fractions) {
    lengths.push_back(static_cast<int64_t>(f * static_cast<double>(n)));
    used += lengths.back();
  }
  for (size_t i = 0; used < n && !lengths.empty(); i = (i + 1) % lengths.size(), ++used) ++lengths[i];
  return random_split(std::move(dataset), lengths, seed);
}

// --- streams

void ExampleStream::reset() { throw ValueError("ExampleStream::reset: this stream cannot start over"); }

std::optional<Example> FunctionStream::next() {
  if (done_) return std::nullopt;
  std::optional<Example> ex = fn_();
  if (!ex) done_ = true;
  return ex;
}

std::optional<Example> DatasetStream::next() {
  if (pos_ >= dataset_->size()) return std::nullopt;
  return dataset_->get(pos_++);
}

StreamBatcher::StreamBatcher(std::shared_ptr<ExampleStream> stream, int64_t batch_size, bool drop_last)
    : stream_(std::move(stream)), batch_size_(batch_size), drop_last_(drop_last) {
  if (!stream_) throw ValueError("StreamBatcher: the stream is null");
  if (batch_size_ < 1) throw ValueError("StreamBatcher: batch_size must be >= 1, got " + std::to_string(batch_size_));
}

std::optional<Batch> StreamBatcher::next() {
  if (done_) return std::nullopt;
  std::vector<Example> examples;
  while (static_cast<int64_t>(examples.size()) < batch_size_) {
    std::optional<Example> ex = stream_->next();
    if (!ex) {
      done_ = true;
      break;
    }
    examples.push_back(std::move(*ex));
  }
  if (examples.empty() || (drop_last_ && static_cast<int64_t>(examples.size()) < batch_size_)) return std::nullopt;
  NoGrad no_grad;
  return collate(examples);
}

}  // namespace loom::data
