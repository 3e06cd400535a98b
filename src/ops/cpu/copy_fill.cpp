// Strided copy with dtype conversion, and fill.
#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"

namespace loom::cpu {

template <typename To, typename From>
static inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f || (std::is_integral_v<From> && v != From{});
  } else if constexpr (std::is_same_v<From, half> || std::is_same_v<From, bfloat16>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, half> || std::is_same_v<To, bfloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return static_cast<To>(detail::float_to_int64(v));  // then wraps to To's width
  } else {
    return static_cast<To>(v);
  }
}

void copy(const Tensor& dst, const Tensor& src) {
  auto L = make_layout<2>(dst.shape(), {&dst, &src});
  std::array<char*, 2> base{static_cast<char*>(dst.data_ptr()), static_cast<char*>(src.data_ptr())};
  if (dst.dtype() == src.dtype()) {
    const int64_t sz = static_cast<int64_t>(dst.itemsize());
    for_each_row<2>(L, base, [sz](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
      if (s[0] == sz && s[1] == sz) {
        std::memcpy(p[0], p[1], static_cast<size_t>(n * sz));
        return;
      }
      char* o = p[0];
      const char* i = p[1];
      for (int64_t k = 0; k < n; ++k, o += s[0], i += s[1]) std::memcpy(o, i, static_cast<size_t>(sz));
    });
    return;
  }
  detail::dispatch_all(dst.dtype(), "copy", [&](auto to_tag) {
    using To = decltype(to_tag);
    detail::dispatch_all(src.dtype(), "copy", [&](auto from_tag) {
      using From = decltype(from_tag);
      for_each_row<2>(L, base, [](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
        if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
          To* o = reinterpret_cast<To*>(p[0]);
          const From* i = reinterpret_cast<const From*>(p[1]);
          for (int64_t k = 0; k < n; ++k) o[k] = convert<To>(i[k]);
          return;
        }
        for (int64_t k = 0; k < n; ++k)
          *reinterpret_cast<To*>(p[0] + k * s[0]) = convert<To>(*reinterpret_cast<const From*>(p[1] + k * s[1]));
      });
    });
  });
}

void fill(const Tensor& dst, Scalar value) {
  auto L = make_layout<1>(dst.shape(), {&dst});
  detail::dispatch_all(dst.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
      v = T(static_cast<float>(value.to_double()));
    else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      v = static_cast<T>(value.to_int());
    else
      v = static_cast<T>(value.to_double());
    // All-zero bits (zeros(), gradients' tables) go through memset, whose large fills skip
    // reading the lines they overwrite (non-temporal stores).
    T zero{};
    const bool zero_bits = std::memcmp(&v, &zero, sizeof(T)) == 0;
    for_each_row<1>(L, {static_cast<char*>(dst.data_ptr())},
                    [v, zero_bits](const std::array<char*, 1>& p, const std::array<int64_t, 1>& s, int64_t n) {
                      if (s[0] == sizeof(T)) {
                        T* o = reinterpret_cast<T*>(p[0]);
                        if (zero_bits) std::memset(static_cast<void*>(o), 0, static_cast<size_t>(n) * sizeof(T));
                        else for (int64_t k = 0; k < n; ++k) o[k] = v;
                      } else {
                        for (int64_t k = 0; k < n; ++k) *reinterpret_cast<T*>(p[0] + k * s[0]) = v;
                      }
                    });
  });
}

// This file's slots of the CPU table (register.cpp), each by name, so that it cannot land in another's.
void add_copy_fill_kernels(detail::Backend& b) {
  b.copy = cpu::copy;
  b.fill = cpu::fill;
}

}  // namespace loom::cpu
