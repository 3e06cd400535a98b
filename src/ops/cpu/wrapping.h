// Integer arithmetic that wraps modulo 2^bits, as NumPy's and PyTorch's integer ops do. Signed
// overflow is undefined behaviour in C++ (UBSan reports it, and the optimizer may assume it
// never happens), so signed integers compute in their unsigned type and convert back, which
// is defined (modular) since C++20. Floats and bool compute as written.
#pragma once

#include <type_traits>

namespace loom::cpu {

template <typename T>
inline constexpr bool kWrapsUnsigned = std::is_integral_v<T> && std::is_signed_v<T>;

template <typename T>
inline T wrapping_add(T a, T b) {
  if constexpr (kWrapsUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}
template <typename T>
inline T wrapping_sub(T a, T b) {
  if constexpr (kWrapsUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return static_cast<T>(a - b);
  }
}
template <typename T>
inline T wrapping_mul(T a, T b) {
  if constexpr (kWrapsUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<T>(a * b);
  }
}
template <typename T>
inline T wrapping_neg(T a) {
  return wrapping_sub(T{}, a);
}

}  // namespace loom::cpu
