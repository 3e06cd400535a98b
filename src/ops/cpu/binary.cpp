// Elementwise binary kernels: float32 arithmetic on contiguous and scalar-broadcast rows runs
// the per-ISA vector kernels (simd/simd.h); other dtypes get plain loops the compiler
// vectorizes; anything else walks strides.
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/simd/simd.h"
#include "ops/cpu/wrapping.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

// Integer results wrap modulo 2^bits as NumPy's: the products run unsigned (signed overflow
// is undefined behaviour). Negative exponents are rejected by power() before the kernel.
template <typename T>
inline T int_pow(T base, T exp) {
  using U = std::make_unsigned_t<T>;
  U r = 1, b = static_cast<U>(base);
  while (exp > 0) {
    if (exp & 1) r = static_cast<U>(r * b);
    b = static_cast<U>(b * b);
    exp = static_cast<T>(exp >> 1);
  }
  return static_cast<T>(r);
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
    // NumPy: x % 0 == 0 (with a warning); x % -1 == 0 also for the lowest value, whose
    // a % b traps (SIGFPE) on x86
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return 0;
    T r = static_cast<T>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  }
}

template <typename T>
inline T py_floordiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    // NumPy's npy_divmod: (a - fmod(a, b)) / b rounded, so that a // b agrees with a % b
    // (1 // 0.1 == 9) and an infinite dividend gives nan
    if (b == 0) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
    if (div == 0) return std::copysign(T(0), a / b);
    T fd = std::floor(div);
    if (div - fd > T(0.5)) fd += T(1);
    return fd;
  } else if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else {
    // NumPy: x // 0 == 0 (with a warning); lowest // -1 wraps to lowest (a / b traps on x86)
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return wrapping_neg(a);
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

// True when every element of t is the same one (a 0-d or one-element tensor broadcast).
inline bool is_scalar_view(const Tensor& t) {
  const Shape& sh = t.shape();
  const Strides& st = t.strides();
  for (size_t i = 0; i < sh.size(); ++i)
    if (sh[i] != 1 && st[i] != 0) return false;
  return true;
}

using VecVV = void (*)(float*, const float*, const float*, int64_t);
using VecVS = void (*)(float*, const float*, float, int64_t);
using VecSV = void (*)(float*, float, const float*, int64_t);

// float32 ops with a vector kernel: contiguous and scalar-broadcast operands go straight to
// the kernel over the flat range (no layout, no allocation), split over the pool when large.
// Returns false when the operands need the strided walk.
bool run_flat_f32(simd::Binary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!out.is_contiguous()) return false;
  const auto& t = simd::table();
  float* o = static_cast<float*>(out.data_ptr());
  const float* x = static_cast<const float*>(a.data_ptr());
  const float* y = static_cast<const float*>(b.data_ptr());
  const int64_t n = out.numel();
  if (a.is_contiguous() && b.is_contiguous()) {
    const VecVV f = t.binary_vv[op];
    parallel_range(0, n, kGrain, [&](int64_t i0, int64_t i1) { f(o + i0, x + i0, y + i0, i1 - i0); });
  } else if (a.is_contiguous() && is_scalar_view(b)) {
    const VecVS f = t.binary_vs[op];
    const float yv = *y;
    parallel_range(0, n, kGrain, [&](int64_t i0, int64_t i1) { f(o + i0, x + i0, yv, i1 - i0); });
  } else if (is_scalar_view(a) && b.is_contiguous()) {
    const VecSV f = t.binary_sv[op];
    const float xv = *x;
    parallel_range(0, n, kGrain, [&](int64_t i0, int64_t i1) { f(o + i0, xv, y + i0, i1 - i0); });
  } else {
    return false;
  }
  return true;
}

template <typename R, typename T, typename F>
void run(const Tensor& out, const Tensor& a, const Tensor& b, F f, int vec = -1) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float>) {
    if (vec >= 0 && run_flat_f32(static_cast<simd::Binary>(vec), out, a, b)) return;
  }
  auto L = make_layout<3>(out.shape(), {&out, &a, &b});
  std::array<char*, 3> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()),
                            static_cast<char*>(b.data_ptr())};
  for_each_row<3>(L, base, [f, vec](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    // Not __restrict: in-place ops (a += b) pass out and a as the same elements.
    R* o = reinterpret_cast<R*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    const T* y = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t sr = sizeof(R), st = sizeof(T);
    if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float>) {
      if (vec >= 0 && s[0] == sr) {
        const auto& t = simd::table();
        if (s[1] == st && s[2] == st) return t.binary_vv[vec](o, x, y, n);
        if (s[1] == st && s[2] == 0) return t.binary_vs[vec](o, x, *y, n);
        if (s[1] == 0 && s[2] == st) return t.binary_sv[vec](o, *x, y, n);
      }
    }
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
    case BinaryOp::Add: return run<T, T>(out, a, b, [](T x, T y) { return wrapping_add(x, y); }, simd::kAdd);
    case BinaryOp::Sub: return run<T, T>(out, a, b, [](T x, T y) { return wrapping_sub(x, y); }, simd::kSub);
    case BinaryOp::Mul: return run<T, T>(out, a, b, [](T x, T y) { return wrapping_mul(x, y); }, simd::kMul);
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) return run<T, T>(out, a, b, [](T x, T y) { return x / y; }, simd::kDiv);
      break;
    case BinaryOp::Pow:
      if constexpr (std::is_floating_point_v<T>)
        return run<T, T>(out, a, b, [](T x, T y) { return std::pow(x, y); });
      else if constexpr (!std::is_same_v<T, bool>)
        return run<T, T>(out, a, b, [](T x, T y) { return int_pow(x, y); });
      break;
    case BinaryOp::Max: return run<T, T>(out, a, b, [](T x, T y) { return max_nan(x, y); }, simd::kMax);
    case BinaryOp::Min: return run<T, T>(out, a, b, [](T x, T y) { return min_nan(x, y); }, simd::kMin);
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
    case BinaryOp::ReluGrad:
      if constexpr (std::is_floating_point_v<T>)
        return run<T, T>(out, a, b, [](T g, T y) { return y <= T(0) ? T(0) : g; }, simd::kReluGrad);
      break;
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
      // select_bits keeps these loops branch-free (a data-dependent branch, e.g. in relu's
      // backward on random signs, mispredicts half the time: 3.5 ns per element).
      if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        const bool* c = reinterpret_cast<const bool*>(p[1]);
        const T* x = reinterpret_cast<const T*>(p[2]);
        const T* y = reinterpret_cast<const T*>(p[3]);
        for (int64_t k = 0; k < n; ++k) {
          o[k] = select_bits(c[k], x[k], y[k]);
        }
        return;
      }
      if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == 0) {  // a scalar y
        T* o = reinterpret_cast<T*>(p[0]);
        const bool* c = reinterpret_cast<const bool*>(p[1]);
        const T* x = reinterpret_cast<const T*>(p[2]);
        const T yv = *reinterpret_cast<const T*>(p[3]);
        for (int64_t k = 0; k < n; ++k) {
          o[k] = select_bits(c[k], x[k], yv);
        }
        return;
      }
      if (s[0] == sizeof(T) && s[1] == 1 && s[2] == 0 && s[3] == sizeof(T)) {  // a scalar x: relu's backward
        T* o = reinterpret_cast<T*>(p[0]);
        const bool* c = reinterpret_cast<const bool*>(p[1]);
        const T xv = *reinterpret_cast<const T*>(p[2]);
        const T* y = reinterpret_cast<const T*>(p[3]);
        for (int64_t k = 0; k < n; ++k) {
          o[k] = select_bits(c[k], xv, y[k]);
        }
        return;
      }
      for (int64_t k = 0; k < n; ++k)
        *reinterpret_cast<T*>(p[0] + k * s[0]) = *reinterpret_cast<const bool*>(p[1] + k * s[1])
                                                      ? *reinterpret_cast<const T*>(p[2] + k * s[2])
                                                      : *reinterpret_cast<const T*>(p[3] + k * s[3]);
    });
  });
}

// This file's slots of the CPU table (register.cpp), each by name, so that it cannot land in another's.
void add_binary_kernels(detail::Backend& b) {
  b.binary = cpu::binary;
  b.kernels.fill("elementwise.where", &cpu::where);  // a slot its op declares (src/ops/elementwise.cpp)
}

}  // namespace loom::cpu
