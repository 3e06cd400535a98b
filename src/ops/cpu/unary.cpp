// Elementwise unary kernels (out and x share a dtype). float32 math on contiguous rows runs
// the per-ISA vector kernels (simd/simd.h: exp and log within 1 ulp of glibc, tanh and
// sigmoid within 2).
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/wrapping.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

// f is the scalar form; vec, when >= 0, names the float32 vector kernel (simd::Unary) that
// contiguous float32 rows use instead.
template <typename T, typename F>
void run(const Tensor& out, const Tensor& x, F f, int vec = -1) {
  if constexpr (std::is_same_v<T, float>) {
    if (vec >= 0 && out.is_contiguous() && x.is_contiguous()) {
      const auto kernel = simd::table().unary[vec];
      float* o = static_cast<float*>(out.data_ptr());
      const float* i = static_cast<const float*>(x.data_ptr());
      parallel_range(0, out.numel(), kGrain, [&](int64_t i0, int64_t i1) { kernel(o + i0, i + i0, i1 - i0); });
      return;
    }
  }
  auto L = make_layout<2>(out.shape(), {&out, &x});
  std::array<char*, 2> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(x.data_ptr())};
  for_each_row<2>(L, base, [f, vec](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      if (vec >= 0 && s[0] == sizeof(T) && s[1] == sizeof(T))
        return simd::table().unary[vec](reinterpret_cast<float*>(p[0]), reinterpret_cast<const float*>(p[1]), n);
    }
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
      T* __restrict o = reinterpret_cast<T*>(p[0]);
      const T* __restrict i = reinterpret_cast<const T*>(p[1]);
      for (int64_t k = 0; k < n; ++k) o[k] = f(i[k]);
      return;
    }
    for (int64_t k = 0; k < n; ++k)
      *reinterpret_cast<T*>(p[0] + k * s[0]) = f(*reinterpret_cast<const T*>(p[1] + k * s[1]));
  });
}

template <typename T>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& x) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return run<T>(out, x, [](T v) { return std::exp(v); }, simd::kExp);
      case UnaryOp::Log: return run<T>(out, x, [](T v) { return std::log(v); }, simd::kLog);
      case UnaryOp::Log1p: return run<T>(out, x, [](T v) { return std::log1p(v); });
      case UnaryOp::Expm1: return run<T>(out, x, [](T v) { return std::expm1(v); });
      case UnaryOp::Sqrt: return run<T>(out, x, [](T v) { return std::sqrt(v); }, simd::kSqrt);
      case UnaryOp::Rsqrt: return run<T>(out, x, [](T v) { return T(1) / std::sqrt(v); });
      case UnaryOp::Sin: return run<T>(out, x, [](T v) { return std::sin(v); });
      case UnaryOp::Cos: return run<T>(out, x, [](T v) { return std::cos(v); });
      case UnaryOp::Tanh: return run<T>(out, x, [](T v) { return std::tanh(v); }, simd::kTanh);
      case UnaryOp::Sigmoid:
        return run<T>(out, x, [](T v) {
          // stable on both tails
          if (v >= 0) return T(1) / (T(1) + std::exp(-v));
          const T e = std::exp(v);
          return e / (T(1) + e);
        }, simd::kSigmoid);
      case UnaryOp::Erf: return run<T>(out, x, [](T v) { return std::erf(v); });
      case UnaryOp::Floor: return run<T>(out, x, [](T v) { return std::floor(v); });
      case UnaryOp::Ceil: return run<T>(out, x, [](T v) { return std::ceil(v); });
      case UnaryOp::Round: return run<T>(out, x, [](T v) { return std::nearbyint(v); });
      case UnaryOp::Abs: return run<T>(out, x, [](T v) { return std::fabs(v); }, simd::kAbs);
      case UnaryOp::Sign:
        return run<T>(out, x, [](T v) { return std::isnan(v) ? v : T((v > 0) - (v < 0)); });
      default: break;
    }
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case UnaryOp::Neg: return run<T>(out, x, [](T v) { return wrapping_neg(v); }, simd::kNeg);
      case UnaryOp::Square: return run<T>(out, x, [](T v) { return wrapping_mul(v, v); }, simd::kSquare);
      // nan propagates (as numpy.maximum(x, 0) and torch.relu); v != v only for floats
      case UnaryOp::Relu: return run<T>(out, x, [](T v) { return v > T(0) || v != v ? v : T(0); }, simd::kRelu);
      case UnaryOp::Abs:
        if constexpr (std::is_integral_v<T>)
          return run<T>(out, x, [](T v) { return v < 0 ? wrapping_neg(v) : v; });
        break;
      case UnaryOp::Sign:
        if constexpr (std::is_integral_v<T>) return run<T>(out, x, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
        break;
      default: break;
    }
  } else {
    if (op == UnaryOp::Not) return run<T>(out, x, [](T v) { return !v; });
  }
  detail::unsupported_dtype("unary op", x.dtype(), "float32 or float64 for math functions");
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& x) {
  detail::dispatch_compute(x.dtype(), "unary op", [&](auto tag) { unary_typed<decltype(tag)>(op, out, x); });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/elementwise.cpp), with its signature, which the slot checks.
void add_unary_kernels(detail::Backend& b) {
  b.kernels.fill("elementwise.unary", &cpu::unary);
}

}  // namespace loom::cpu
