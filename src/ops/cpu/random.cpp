// Counter-based random numbers: element i of a draw is a hash of (key, i), so results do not
// depend on how the work is split over threads.
#include <cmath>

#include "loom/ops/random.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

inline uint64_t hash(uint64_t key, uint64_t i) { return Generator::mix(key, i); }
inline double unit53(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
inline float unit24(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1.0p-24f; }

}  // namespace

void random(RandomKind kind, const Tensor& out, uint64_t key, double a, double b) {
  const int64_t n = out.numel();
  detail::dispatch_compute(out.dtype(), "random", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(0, n, 1 << 15, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const uint64_t h = hash(key, static_cast<uint64_t>(i));
        double v;
        switch (kind) {
          case RandomKind::Uniform:
            v = std::is_same_v<T, float> ? a + (b - a) * unit24(h) : a + (b - a) * unit53(h);
            if (v >= b) v = a;  // rounding of a + (b-a)*u may reach b for float
            break;
          case RandomKind::Normal: {
            const double u1 = 1.0 - unit53(h);  // (0, 1]
            const double u2 = unit53(hash(key ^ 0x9e3779b97f4a7c15ull, static_cast<uint64_t>(i)));
            v = a + b * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
            break;
          }
          case RandomKind::Bernoulli: v = unit53(h) < a ? 1.0 : 0.0; break;
          case RandomKind::Integer: {
            const uint64_t span = static_cast<uint64_t>(b - a);
            v = a + static_cast<double>(static_cast<uint64_t>((static_cast<unsigned __int128>(h) * span) >> 64));
            break;
          }
          default: v = 0;
        }
        o[i] = static_cast<T>(v);
      }
    });
  });
}

}  // namespace loom::cpu
