#pragma once
// Strided N-operand iteration for CPU kernels. Shapes are coalesced (adjacent axes merged
// when every operand's strides allow it) and the work is split over the thread pool; the
// kernel sees inner rows: kernel(ptrs, inner_strides_in_bytes, n).
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include "loom/core/parallel.h"
#include "loom/core/tensor.h"

namespace loom::cpu {

inline constexpr int64_t kGrain = 32768;  // elements per task, below which one thread runs

// c ? a : b on the bit patterns: an and/or mask instead of a data-dependent branch (which
// mispredicts half the time on random data, e.g. relu's backward or max pooling), and loops
// of it vectorize with plain SSE2.
template <typename T>
inline T select_bits(bool c, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t,
                               std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  U ua, ub;
  std::memcpy(&ua, &a, sizeof(T));
  std::memcpy(&ub, &b, sizeof(T));
  const U m = static_cast<U>(U{0} - static_cast<U>(c));
  const U r = static_cast<U>((ua & m) | (ub & static_cast<U>(~m)));
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

// parallel_for for the kernels: runs inline (no std::function, no pool) when the range is
// one grain or the pool has one thread, which is what small tensors hit.
template <typename F>
inline void parallel_range(int64_t begin, int64_t end, int64_t grain, F&& f) {
  if (end <= begin) return;
  if (end - begin <= grain || get_num_threads() == 1) {
    f(begin, end);
    return;
  }
  parallel_for(begin, end, grain, std::function<void(int64_t, int64_t)>(std::ref(f)));
}

template <size_t N>
struct StridedLayout {
  std::vector<int64_t> shape;                      // coalesced, at least one axis
  std::array<std::vector<int64_t>, N> strides;     // bytes
  int64_t numel = 1;
};

// operands[i] must have `shape` as its shape, possibly through zero strides (broadcast).
template <size_t N>
StridedLayout<N> make_layout(const Shape& shape, const std::array<const Tensor*, N>& operands) {
  StridedLayout<N> L;
  std::vector<int64_t> sh;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    sh.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k)
      st[k].push_back(operands[k]->strides()[d] * static_cast<int64_t>(operands[k]->itemsize()));
  }
  L.numel = shape_numel(shape);
  if (sh.empty()) {
    L.shape = {1};
    for (size_t k = 0; k < N; ++k) L.strides[k] = {0};
    return L;
  }
  // merge axis d into d+1 from the right
  L.shape.push_back(sh.back());
  for (size_t k = 0; k < N; ++k) L.strides[k].push_back(st[k].back());
  for (size_t d = sh.size() - 1; d-- > 0;) {
    bool merge = true;
    for (size_t k = 0; k < N; ++k)
      if (st[k][d] != L.strides[k].front() * L.shape.front()) merge = false;
    if (merge) {
      L.shape.front() *= sh[d];
    } else {
      L.shape.insert(L.shape.begin(), sh[d]);
      for (size_t k = 0; k < N; ++k) L.strides[k].insert(L.strides[k].begin(), st[k][d]);
    }
  }
  return L;
}

// Calls kernel(ptrs, inner_strides, n) over all inner rows of the layout, in parallel.
template <size_t N, typename Kernel>
void for_each_row(const StridedLayout<N>& L, const std::array<char*, N>& base, Kernel&& kernel,
                  int64_t grain = kGrain) {
  if (L.numel == 0) return;
  const size_t nd = L.shape.size();
  const int64_t inner = L.shape.back();
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = L.strides[k].back();
  auto run = [&](int64_t begin, int64_t end) {
    // begin/end are element positions; walk the multi-index of the outer axes
    std::vector<int64_t> idx(nd, 0);
    int64_t rem = begin;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % L.shape[d];
      rem /= L.shape[d];
    }
    int64_t pos = begin;
    while (pos < end) {
      std::array<char*, N> p;
      for (size_t k = 0; k < N; ++k) {
        int64_t off = 0;
        for (size_t d = 0; d < nd; ++d) off += idx[d] * L.strides[k][d];
        p[k] = base[k] + off;
      }
      const int64_t n = std::min(inner - idx[nd - 1], end - pos);
      kernel(p, inner_strides, n);
      pos += n;
      idx[nd - 1] += n;
      for (size_t d = nd - 1; d > 0 && idx[d] >= L.shape[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  };
  parallel_range(0, L.numel, grain, run);
}

}  // namespace loom::cpu
