#pragma once
// Run sums of the fused normalization kernels (layer_norm.cpp, batch_norm.cpp) in plain C++:
// the float64 paths, and the arithmetic the float32 vector kernels of simd::Table follow.
// Internal: include only from src/ops/cpu.
#include <algorithm>
#include <cstdint>

#include "loom/core/tensor.h"

namespace loom::cpu::row_sums {

inline constexpr int64_t kChunk = 4096;  // values per float lane fold

template <typename T>
inline const T* opt(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Row sums in 16-byte vectors (SSE2 in the baseline build) with several independent
// accumulators: GCC does not vectorise a float reduction without reassociation flags, and
// interleaved scalar lanes vectorise badly, so the lanes are written out as vectors.
typedef float F4 __attribute__((vector_size(16)));
typedef double D2 __attribute__((vector_size(16)));
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  using type = F4;
};
template <>
struct VecOf<double> {
  using type = D2;
};
template <typename T>
using Vec = typename VecOf<T>::type;
template <typename T>
inline constexpr int64_t kW = 16 / sizeof(T);  // values per vector

template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
inline double hsum(Vec<T> v) {
  double s = 0;
  for (int64_t k = 0; k < kW<T>; ++k) s += static_cast<double>(v[k]);
  return s;
}

// sum x (four vector accumulators)
template <typename T>
inline double row_sum(const T* x, int64_t n) {
  constexpr int64_t step = 4 * kW<T>;
  double total = 0;
  int64_t i = 0;
  while (n - i >= step) {
    const int64_t end = i + std::min<int64_t>(kChunk, (n - i) / step * step);
    Vec<T> a0{}, a1{}, a2{}, a3{};
    for (; i < end; i += step) {
      a0 += load(x + i);
      a1 += load(x + i + kW<T>);
      a2 += load(x + i + 2 * kW<T>);
      a3 += load(x + i + 3 * kW<T>);
    }
    total += hsum<T>((a0 + a1) + (a2 + a3));
  }
  for (; i < n; ++i) total += static_cast<double>(x[i]);
  return total;
}

// s1 = sum (x - m), s2 = sum (x - m)^2 (two vector accumulators each)
template <typename T>
inline void row_centred(const T* x, int64_t n, T m, double& s1, double& s2) {
  constexpr int64_t step = 2 * kW<T>;
  const Vec<T> mv = Vec<T>{} + m;
  s1 = 0;
  s2 = 0;
  int64_t i = 0;
  while (n - i >= step) {
    const int64_t end = i + std::min<int64_t>(kChunk, (n - i) / step * step);
    Vec<T> a0{}, a1{}, b0{}, b1{};
    for (; i < end; i += step) {
      const Vec<T> d0 = load(x + i) - mv, d1 = load(x + i + kW<T>) - mv;
      a0 += d0;
      a1 += d1;
      b0 += d0 * d0;
      b1 += d1 * d1;
    }
    s1 += hsum<T>(a0 + a1);
    s2 += hsum<T>(b0 + b1);
  }
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i] - m);
    s1 += d;
    s2 += d * d;
  }
}

// sd = sum (x - m), sg = sum g w, sgd = sum g w (x - m)  (w == nullptr: w = 1)
template <typename T>
inline void row_grad_sums(const T* x, const T* g, const T* w, int64_t n, T m, double& sd, double& sg, double& sgd) {
  constexpr int64_t step = 2 * kW<T>;
  const Vec<T> mv = Vec<T>{} + m;
  sd = sg = sgd = 0;
  int64_t i = 0;
  while (n - i >= step) {
    const int64_t end = i + std::min<int64_t>(kChunk, (n - i) / step * step);
    Vec<T> a0{}, a1{}, b0{}, b1{}, c0{}, c1{};
    for (; i < end; i += step) {
      const Vec<T> d0 = load(x + i) - mv, d1 = load(x + i + kW<T>) - mv;
      Vec<T> g0 = load(g + i), g1 = load(g + i + kW<T>);
      if (w) {
        g0 *= load(w + i);
        g1 *= load(w + i + kW<T>);
      }
      a0 += d0;
      a1 += d1;
      b0 += g0;
      b1 += g1;
      c0 += g0 * d0;
      c1 += g1 * d1;
    }
    sd += hsum<T>(a0 + a1);
    sg += hsum<T>(b0 + b1);
    sgd += hsum<T>(c0 + c1);
  }
  for (; i < n; ++i) {
    const T d = x[i] - m, gh = w ? g[i] * w[i] : g[i];
    sd += static_cast<double>(d);
    sg += static_cast<double>(gh);
    sgd += static_cast<double>(gh) * static_cast<double>(d);
  }
}

}  // namespace loom::cpu::row_sums
