#pragma once
// Seeded random numbers. A Generator produces the same numbers for the same seed whatever
// the thread count (counter-based: element i of a draw depends only on seed, draw and i).
#include <cstdint>
#include <memory>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

class LOOM_API Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  // Advances the stream by one draw and returns its key.
  uint64_t next_key() { return mix(seed_, counter_++); }
  uint64_t counter() const { return counter_; }
  void set_state(uint64_t seed, uint64_t counter) { seed_ = seed; counter_ = counter; }
  static uint64_t mix(uint64_t a, uint64_t b);

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

// The process-wide generator used when none is passed; manual_seed resets it.
LOOM_API Generator& default_generator();
LOOM_API void manual_seed(uint64_t seed);

LOOM_API Tensor uniform(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = Float32,
               Device device = default_device(), Generator* gen = nullptr);
LOOM_API Tensor normal(const Shape& shape, double mean = 0.0, double stddev = 1.0, DType dtype = Float32,
              Device device = default_device(), Generator* gen = nullptr);
LOOM_API Tensor randn(const Shape& shape, DType dtype = Float32, Device device = default_device(), Generator* gen = nullptr);
LOOM_API Tensor bernoulli(const Shape& shape, double p, DType dtype = Float32, Device device = default_device(),
                 Generator* gen = nullptr);
// integers in [low, high)
LOOM_API Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = Int64, Device device = default_device(),
               Generator* gen = nullptr);
LOOM_API Tensor permutation(int64_t n, Device device = default_device(), Generator* gen = nullptr);

}  // namespace loom
