#pragma once
// Helpers of the unit tests from train up: data to train on.
#include <loom/core/device.h>
#include <loom/core/dtype.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/random.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace loom_test {

// Three Gaussian blobs in 4-d with labels 0..2: an easy classification problem for training tests.
inline std::shared_ptr<loom::data::TensorDataset> blobs(int64_t n, uint64_t seed) {
  loom::Generator g(seed);
  loom::Tensor labels = loom::randint(0, 3, {n}, loom::Int64, loom::default_device(), &g);
  loom::Tensor centers = loom::from_vector<float>({2, 0, 0, 1, -2, 1, 0, 0, 0, -2, 2, -1}, {3, 4});
  loom::Tensor x = loom::take(centers, labels, 0) + loom::normal({n, 4}, 0, 0.6, loom::Float32, loom::default_device(), &g);
  return std::make_shared<loom::data::TensorDataset>(std::vector<loom::Tensor>{x, labels});
}

}  // namespace loom_test
