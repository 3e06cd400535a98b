// Elementwise binary kernels: contiguous and scalar-broadcast rows get plain loops the
// compiler vectorizes; anything else walks strides.
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

template <typename T>
inline T int_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == static_cast<T>(-1)) return (exp % 2) ? static_cast<T>(-1) : 1;
    return 0;
  }
  T r = 1;
  while (exp) {
    if (exp & 1) r = static_cast<T>(r * base);
    base = static_cast<T>(base * base);
    exp >>= 1;
  }
  return r;
}

template <typename T>
inline T py_mod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else if constexpr (std::is_same_v<T, bool>) {
    return false;
  } else {
    if (b == 0) return 0;
    T r = static_cast<T>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  }
}

template <typename T>
inline T py_floordiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::floor(a / b);
  } else if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else {
    if (b == 0) return 0;
    T q = static_cast<T>(a / b);
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
}

template <typename T>
inline T max_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a > b ? a : b;
}
template <typename T>
inline T min_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? a : b;
}

template <typename R, typename T, typename F>
void run(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  auto L = make_layout<3>(out.shape(), {&out, &a, &b});
  std::array<char*, 3> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()),
                            static_cast<char*>(b.data_ptr())};
  for_each_row<3>(L, base, [f](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    R* __restrict o = reinterpret_cast<R*>(p[0]);
    const T* __restrict x = reinterpret_cast<const T*>(p[1]);
    const T* __restrict y = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t sr = sizeof(R), st = sizeof(T);
    if (s[0] == sr && s[1] == st && s[2] == st) {
      for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], y[k]);
    } else if (s[0] == sr && s[1] == st && s[2] == 0) {
      const T yv = *y;
      for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], yv);
    } else if (s[0] == sr && s[1] == 0 && s[2] == st) {
      const T xv = *x;
      for (int64_t k = 0; k < n; ++k) o[k] = f(xv, y[k]);
    } else {
      for (int64_t k = 0; k < n; ++k)
        *reinterpret_cast<R*>(p[0] + k * s[0]) =
            f(*reinterpret_cast<const T*>(p[1] + k * s[1]), *reinterpret_cast<const T*>(p[2] + k * s[2]));
    }
  });
}

template <typename T>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: return run<T, T>(out, a, b, [](T x, T y) { return static_cast<T>(x + y); });
    case BinaryOp::Sub: return run<T, T>(out, a, b, [](T x, T y) { return static_cast<T>(x - y); });
    case BinaryOp::Mul: return run<T, T>(out, a, b, [](T x, T y) { return static_cast<T>(x * y); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) return run<T, T>(out, a, b, [](T x, T y) { return x / y; });
      break;
    case BinaryOp::Pow:
      if constexpr (std::is_floating_point_v<T>)
        return run<T, T>(out, a, b, [](T x, T y) { return std::pow(x, y); });
      else if constexpr (!std::is_same_v<T, bool>)
        return run<T, T>(out, a, b, [](T x, T y) { return int_pow(x, y); });
      break;
    case BinaryOp::Max: return run<T, T>(out, a, b, [](T x, T y) { return max_nan(x, y); });
    case BinaryOp::Min: return run<T, T>(out, a, b, [](T x, T y) { return min_nan(x, y); });
    case BinaryOp::Mod: return run<T, T>(out, a, b, [](T x, T y) { return py_mod(x, y); });
    case BinaryOp::FloorDiv: return run<T, T>(out, a, b, [](T x, T y) { return py_floordiv(x, y); });
    case BinaryOp::Eq: return run<bool, T>(out, a, b, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return run<bool, T>(out, a, b, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return run<bool, T>(out, a, b, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return run<bool, T>(out, a, b, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return run<bool, T>(out, a, b, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return run<bool, T>(out, a, b, [](T x, T y) { return x >= y; });
    case BinaryOp::And: return run<bool, T>(out, a, b, [](T x, T y) { return x && y; });
    case BinaryOp::Or: return run<bool, T>(out, a, b, [](T x, T y) { return x || y; });
    case BinaryOp::Xor: return run<bool, T>(out, a, b, [](T x, T y) { return bool(x) != bool(y); });
  }
  detail::unsupported_dtype("binary op", a.dtype(), "see the op's documentation");
}

}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  detail::dispatch_compute(a.dtype(), "binary op", [&](auto tag) { binary_typed<decltype(tag)>(op, out, a, b); });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  auto L = make_layout<4>(out.shape(), {&out, &cond, &a, &b});
  std::array<char*, 4> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(cond.data_ptr()),
                            static_cast<char*>(a.data_ptr()), static_cast<char*>(b.data_ptr())};
  detail::dispatch_compute(out.dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    for_each_row<4>(L, base, [](const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        const bool* c = reinterpret_cast<const bool*>(p[1]);
        const T* x = reinterpret_cast<const T*>(p[2]);
        const T* y = reinterpret_cast<const T*>(p[3]);
        for (int64_t k = 0; k < n; ++k) o[k] = c[k] ? x[k] : y[k];
        return;
      }
      for (int64_t k = 0; k < n; ++k)
        *reinterpret_cast<T*>(p[0] + k * s[0]) = *reinterpret_cast<const bool*>(p[1] + k * s[1])
                                                      ? *reinterpret_cast<const T*>(p[2] + k * s[2])
                                                      : *reinterpret_cast<const T*>(p[3] + k * s[3]);
    });
  });
}

}  // namespace loom::cpu
