#include "loom/ops/random.h"

#include <numeric>

#include "ops/internal.h"
#include "ops/random_mix.h"

namespace loom {

uint64_t Generator::mix(uint64_t a, uint64_t b) { return detail::random_mix(a, b); }

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

namespace {

// The kernel's slot, declared beside its ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/random.cpp: out (allocated by the op, of a kernel dtype) <- draws of `kind` with
// parameters a and b, element i a function of (key, i) alone (ops/random_mix.h), so the bits do
// not depend on how the work is split over threads.
constinit const detail::KernelSlot<void(detail::RandomKind kind, const Tensor& out, uint64_t key, double a, double b)>
    kRandom{"random.random"};

Tensor draw(detail::RandomKind kind, const Shape& shape, double a, double b, DType dtype, Device device, Generator* gen,
            const char* name) {
  detail::check_device(device, name);
  Generator& g = gen ? *gen : default_generator();
  const DType kd = detail::kernel_dtype(dtype);
  Tensor t = detail::alloc(shape, kd, device);
  kRandom(device)(kind, t, g.next_key(), a, b);
  return detail::cast_raw(t, dtype);
}

void require_float(DType dtype, const char* name) {
  if (!is_floating(dtype))
    throw DTypeError(std::string(name) + ": dtype " + dtype_name(dtype) + " is not floating (valid: float16, bfloat16, float32, float64)");
}

}  // namespace

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device, Generator* gen) {
  require_float(dtype, "uniform");
  if (!(low < high)) throw ValueError("uniform: low (" + std::to_string(low) + ") must be below high (" + std::to_string(high) + ")");
  return draw(detail::RandomKind::Uniform, shape, low, high, dtype, device, gen, "uniform");
}

Tensor normal(const Shape& shape, double mean, double stddev, DType dtype, Device device, Generator* gen) {
  require_float(dtype, "normal");
  if (stddev < 0) throw ValueError("normal: stddev must be >= 0, got " + std::to_string(stddev));
  return draw(detail::RandomKind::Normal, shape, mean, stddev, dtype, device, gen, "normal");
}

Tensor randn(const Shape& shape, DType dtype, Device device, Generator* gen) { return normal(shape, 0, 1, dtype, device, gen); }

Tensor bernoulli(const Shape& shape, double p, DType dtype, Device device, Generator* gen) {
  if (!(p >= 0 && p <= 1)) throw ValueError("bernoulli: p must be in [0, 1], got " + std::to_string(p));
  return draw(detail::RandomKind::Bernoulli, shape, p, 0, dtype, device, gen, "bernoulli");
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Device device, Generator* gen) {
  if (low >= high) throw ValueError("randint: low (" + std::to_string(low) + ") must be below high (" + std::to_string(high) + ")");
  return draw(detail::RandomKind::Integer, shape, static_cast<double>(low), static_cast<double>(high), dtype, device, gen, "randint");
}

Tensor permutation(int64_t n, Device device, Generator* gen) {
  detail::check_device(device, "permutation");
  if (n < 0) throw ValueError("permutation: n must be >= 0, got " + std::to_string(n));
  Generator& g = gen ? *gen : default_generator();
  const uint64_t key = g.next_key();
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates driven by the counter-based stream
    const uint64_t h = Generator::mix(key, static_cast<uint64_t>(i));
    const int64_t j = static_cast<int64_t>((static_cast<unsigned __int128>(h) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(v[i], v[j]);
  }
  Tensor t = detail::alloc({n}, DType::Int64, device);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

}  // namespace loom
