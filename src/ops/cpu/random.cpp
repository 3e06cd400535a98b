// Counter-based random numbers: element i of a draw is a hash of (key, i), so results do not
// depend on how the work is split over threads.
#include <cmath>

#include "loom/ops/random.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"
#include "ops/random_mix.h"

namespace loom::cpu {

namespace {

inline uint64_t hash(uint64_t key, uint64_t i) { return detail::random_mix(key, i); }
inline double unit53(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
inline float unit24(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1.0p-24f; }

// One loop per kind (the kind is fixed for the whole draw), each with the hash inlined.
template <typename T, typename F>
void draw(T* o, int64_t n, F value) {
  parallel_for(0, n, 1 << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) o[i] = static_cast<T>(value(static_cast<uint64_t>(i)));
  });
}

}  // namespace

void random(RandomKind kind, const Tensor& out, uint64_t key, double a, double b) {
  const int64_t n = out.numel();
  detail::dispatch_compute(out.dtype(), "random", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data_ptr());
    switch (kind) {
      case RandomKind::Uniform:
        return draw(o, n, [=](uint64_t i) {
          const double v = std::is_same_v<T, float> ? a + (b - a) * unit24(hash(key, i)) : a + (b - a) * unit53(hash(key, i));
          return v >= b ? a : v;  // rounding of a + (b-a)*u may reach b for float
        });
      case RandomKind::Normal:
        return draw(o, n, [=](uint64_t i) {
          const double u1 = 1.0 - unit53(hash(key, i));  // (0, 1]
          const double u2 = unit53(hash(key ^ 0x9e3779b97f4a7c15ull, i));
          return a + b * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
        });
      case RandomKind::Bernoulli:
        return draw(o, n, [=](uint64_t i) { return unit53(hash(key, i)) < a ? 1.0 : 0.0; });
      case RandomKind::Integer: {
        const uint64_t span = static_cast<uint64_t>(b - a);
        return draw(o, n, [=](uint64_t i) {
          return a + static_cast<double>(static_cast<uint64_t>((static_cast<unsigned __int128>(hash(key, i)) * span) >> 64));
        });
      }
    }
    draw(o, n, [](uint64_t) { return 0.0; });
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/random.cpp), with its signature, which the slot checks.
void add_random_kernels(detail::Backend& b) {
  b.kernels.fill("random.random", &cpu::random);
}

}  // namespace loom::cpu
