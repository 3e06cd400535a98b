// Reductions. The input is viewed as (kept axes..., reduced axes...). Three paths:
//  A: the innermost reduced axis is contiguous: each output reduces contiguous rows with
//     independent partial accumulators (vectorizes);
//  B: the innermost kept axis is contiguous: whole rows are folded into the outputs, row by row;
//  C: anything else: each output walks its reduced elements by strides.
// Work is split over kept elements only, so no two threads write one output.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/wrapping.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

struct Geometry {
  std::vector<int64_t> kshape, kstride;  // kept axes of x (strides in elements)
  std::vector<int64_t> rshape, rstride;  // reduced axes of x
  int64_t knumel = 1, rnumel = 1;
};

void coalesce(std::vector<int64_t>& shape, std::vector<int64_t>& stride) {
  std::vector<int64_t> s, t;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!s.empty() && t.back() == stride[i] * shape[i]) {
      s.back() *= shape[i];
      t.back() = stride[i];
    } else {
      s.push_back(shape[i]);
      t.push_back(stride[i]);
    }
  }
  shape = s;
  stride = t;
}

Geometry geometry(const Tensor& x, const std::vector<bool>& reduced) {
  Geometry g;
  for (size_t d = 0; d < reduced.size(); ++d) {
    (reduced[d] ? g.rshape : g.kshape).push_back(x.shape()[d]);
    (reduced[d] ? g.rstride : g.kstride).push_back(x.strides()[d]);
  }
  g.knumel = shape_numel(g.kshape);
  g.rnumel = shape_numel(g.rshape);
  // Kept axes are not coalesced: the output is laid out as their row-major order.
  coalesce(g.rshape, g.rstride);
  return g;
}

// Element offset of kept element `k` (row-major over kshape).
inline int64_t kept_offset(const Geometry& g, int64_t k) {
  int64_t off = 0;
  for (size_t d = g.kshape.size(); d-- > 0;) {
    off += (k % g.kshape[d]) * g.kstride[d];
    k /= g.kshape[d];
  }
  return off;
}

// Calls fn(offset) for every multi-index of the reduced axes except the innermost one.
template <typename F>
void for_each_outer(const Geometry& g, F&& fn) {
  const size_t nd = g.rshape.size();
  if (nd <= 1) {
    fn(int64_t{0});
    return;
  }
  std::vector<int64_t> idx(nd - 1, 0);
  for (;;) {
    int64_t off = 0;
    for (size_t d = 0; d + 1 < nd; ++d) off += idx[d] * g.rstride[d];
    fn(off);
    size_t d = nd - 1;
    while (d-- > 0) {
      if (++idx[d] < g.rshape[d]) break;
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

template <typename T, typename Acc>
struct SumOp {
  static Acc init() { return Acc(0); }
  static Acc step(Acc a, T v) { return wrapping_add(a, static_cast<Acc>(v)); }
  static Acc combine(Acc a, Acc b) { return wrapping_add(a, b); }
};
template <typename T, typename Acc>
struct ProdOp {
  static Acc init() { return Acc(1); }
  static Acc step(Acc a, T v) { return wrapping_mul(a, static_cast<Acc>(v)); }
  static Acc combine(Acc a, Acc b) { return wrapping_mul(a, b); }
};
template <typename T, typename Acc>
struct MaxOp {
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  static Acc step(Acc a, T v) {
    if constexpr (std::is_floating_point_v<T>) return (v > a || v != v) && a == a ? v : a;
    else return v > a ? v : a;
  }
  static Acc combine(Acc a, Acc b) { return step(a, b); }  // Acc is T
};
template <typename T, typename Acc>
struct MinOp {
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  static Acc step(Acc a, T v) {
    if constexpr (std::is_floating_point_v<T>) return (v < a || v != v) && a == a ? v : a;
    else return v < a ? v : a;
  }
  static Acc combine(Acc a, Acc b) { return step(a, b); }  // Acc is T
};
template <typename T, typename Acc>
struct AllOp {
  static Acc init() { return true; }
  static Acc step(Acc a, T v) { return a && static_cast<bool>(v); }
  static Acc combine(Acc a, Acc b) { return a && b; }
};
template <typename T, typename Acc>
struct AnyOp {
  static Acc init() { return false; }
  static Acc step(Acc a, T v) { return a || static_cast<bool>(v); }
  static Acc combine(Acc a, Acc b) { return a || b; }
};

// Reduces n contiguous values with independent partial accumulators so that the loop
// vectorizes without reassociating a single chain.
template <typename Op, typename T, typename Acc>
Acc reduce_contiguous(const T* p, int64_t n, Acc acc) {
  constexpr int kLanes = 16;
  if (n >= 4 * kLanes) {
    Acc part[kLanes];
    for (int j = 0; j < kLanes; ++j) part[j] = Op::init();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) part[j] = Op::step(part[j], p[i + j]);
    // partials are combined as Acc: narrowing them to T would wrap integer sums (bool, uint8)
    for (int j = 0; j < kLanes; ++j) acc = Op::combine(acc, part[j]);
    for (; i < n; ++i) acc = Op::step(acc, p[i]);
    return acc;
  }
  for (int64_t i = 0; i < n; ++i) acc = Op::step(acc, p[i]);
  return acc;
}

// One contiguous row folded into acc: float32 sum/max/min run the vector kernels.
template <typename Op, typename T, typename Acc>
inline Acc reduce_row(const T* p, int64_t n, Acc acc) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<Acc, float>) {
    if constexpr (std::is_same_v<Op, SumOp<float, float>>) return acc + simd::table().sum(p, n);
    if constexpr (std::is_same_v<Op, MaxOp<float, float>>) return n ? Op::step(acc, simd::table().max(p, n)) : acc;
    if constexpr (std::is_same_v<Op, MinOp<float, float>>) return n ? Op::step(acc, simd::table().min(p, n)) : acc;
  }
  return reduce_contiguous<Op, T, Acc>(p, n, acc);
}

// float32 sum over a strided axis with contiguous kept columns (e.g. axis 0 of a matrix):
// blocks of columns are split over the pool and each block adds whole rows into its
// L1-resident slice of the output. Blocks of up to 1024 columns (4 KB of output; each row's
// slice spans a page, which the hardware prefetcher streams: 1.35x faster than 256 columns
// on 1024 x 1024), narrower when that would leave threads without a block. A column's sum
// does not depend on the blocking, so results are the same for any thread count.
void sum_columns_f32(const Geometry& g, float* o, const float* base, int64_t inner, int64_t inner_stride) {
  const int64_t kin = g.kshape.back(), kouter = g.knumel / kin;
  constexpr int64_t kMaxBlock = 1024;
  const int64_t threads = get_num_threads();
  int64_t block = kMaxBlock;
  if (kouter < threads) block = std::clamp<int64_t>(((kin + threads - 1) / threads + 63) / 64 * 64, 64, kMaxBlock);
  const int64_t blocks = (kin + block - 1) / block;
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, g.rnumel * block));
  const auto sum_rows_into = simd::table().sum_rows_into;
  parallel_range(0, kouter * blocks, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t a = i / blocks, j0 = (i % blocks) * block, jn = std::min(block, kin - j0);
      float* acc = o + a * kin + j0;
      for (int64_t j = 0; j < jn; ++j) acc[j] = 0.0f;
      const float* p = base + kept_offset(g, a * kin) + j0;
      for_each_outer(g, [&](int64_t off) { sum_rows_into(acc, p + off, inner, inner_stride, jn); });
    }
  });
}

template <typename Op, typename T, typename Acc>
void reduce_with(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced) {
  const Geometry g = geometry(x, reduced);
  Acc* o = static_cast<Acc*>(out.data_ptr());
  const T* base = static_cast<const T*>(x.data_ptr());
  if (g.knumel == 0) return;
  if (g.rnumel == 0) {
    for (int64_t k = 0; k < g.knumel; ++k) o[k] = Op::init();
    return;
  }
  const size_t nr = g.rshape.size();
  const int64_t inner = nr ? g.rshape.back() : 1;
  const int64_t inner_stride = nr ? g.rstride.back() : 0;
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, g.rnumel));

  if (inner_stride == 1) {  // path A
    parallel_range(0, g.knumel, grain, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const T* p = base + kept_offset(g, k);
        Acc acc = Op::init();
        for_each_outer(g, [&](int64_t off) { acc = reduce_row<Op, T, Acc>(p + off, inner, acc); });
        o[k] = acc;
      }
    });
    return;
  }
  const int64_t kin = g.kshape.empty() ? 1 : g.kshape.back();
  if (!g.kshape.empty() && g.kstride.back() == 1 && kin >= 8) {  // path B
    if constexpr (std::is_same_v<Op, SumOp<float, float>>) return sum_columns_f32(g, o, base, inner, inner_stride);
    const int64_t kouter = g.knumel / kin;
    parallel_range(0, kouter, std::max<int64_t>(1, grain / kin), [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) {
        Acc* acc = o + a * kin;
        for (int64_t j = 0; j < kin; ++j) acc[j] = Op::init();
        const T* p = base + kept_offset(g, a * kin);
        for_each_outer(g, [&](int64_t off) {
          for (int64_t r = 0; r < inner; ++r) {
            const T* row = p + off + r * inner_stride;
            for (int64_t j = 0; j < kin; ++j) acc[j] = Op::step(acc[j], row[j]);
          }
        });
      }
    });
    return;
  }
  parallel_for(0, g.knumel, grain, [&](int64_t k0, int64_t k1) {  // path C
    for (int64_t k = k0; k < k1; ++k) {
      const T* p = base + kept_offset(g, k);
      Acc acc = Op::init();
      for_each_outer(g, [&](int64_t off) {
        for (int64_t r = 0; r < inner; ++r) acc = Op::step(acc, p[off + r * inner_stride]);
      });
      o[k] = acc;
    }
  });
}

template <typename T, bool kMax>
void arg_reduce(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced) {
  const Geometry g = geometry(x, reduced);
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  const T* base = static_cast<const T*>(x.data_ptr());
  int64_t axis = 0;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) axis = static_cast<int64_t>(d);
  const int64_t n = x.shape()[axis], stride = x.strides()[axis];
  parallel_for(0, g.knumel, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, n)), [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const T* p = base + kept_offset(g, k);
      int64_t best = 0;
      T bv = p[0];
      for (int64_t i = 1; i < n; ++i) {
        const T v = p[i * stride];
        if constexpr (std::is_floating_point_v<T>) {
          if (bv != bv) break;  // the first NaN wins, as in NumPy
          if (v != v || (kMax ? v > bv : v < bv)) { bv = v; best = i; }
        } else {
          if (kMax ? v > bv : v < bv) { bv = v; best = i; }
        }
      }
      o[k] = best;
    }
  });
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& reduced) {
  detail::dispatch_compute(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    switch (op) {
      case ReduceOp::Sum: return reduce_with<SumOp<T, Acc>, T, Acc>(out, x, reduced);
      case ReduceOp::Prod: return reduce_with<ProdOp<T, Acc>, T, Acc>(out, x, reduced);
      case ReduceOp::Max: return reduce_with<MaxOp<T, T>, T, T>(out, x, reduced);
      case ReduceOp::Min: return reduce_with<MinOp<T, T>, T, T>(out, x, reduced);
      case ReduceOp::All: return reduce_with<AllOp<T, bool>, T, bool>(out, x, reduced);
      case ReduceOp::Any: return reduce_with<AnyOp<T, bool>, T, bool>(out, x, reduced);
      case ReduceOp::ArgMax: return arg_reduce<T, true>(out, x, reduced);
      case ReduceOp::ArgMin: return arg_reduce<T, false>(out, x, reduced);
    }
  });
}

void cumsum(const Tensor& out, const Tensor& x, int64_t axis) {
  // out is contiguous with x's shape and the accumulation dtype
  if (x.numel() == 0) return;  // nothing to write, and no buffer to point into
  std::vector<bool> reduced(x.shape().size(), false);
  reduced[axis] = true;
  const Geometry g = geometry(x, reduced);
  const int64_t n = x.shape()[axis], xs = x.strides()[axis];
  const Strides ostr = out.strides();
  int64_t os = ostr[axis];
  Geometry go;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (!reduced[d]) {
      go.kshape.push_back(out.shape()[d]);
      go.kstride.push_back(ostr[d]);
    }
  detail::dispatch_compute(x.dtype(), "cumsum", [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    const T* xb = static_cast<const T*>(x.data_ptr());
    Acc* ob = static_cast<Acc*>(out.data_ptr());
    parallel_for(0, g.knumel, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, n)), [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const T* p = xb + kept_offset(g, k);
        Acc* q = ob + kept_offset(go, k);
        Acc acc = 0;
        for (int64_t i = 0; i < n; ++i) {
          acc = wrapping_add(acc, static_cast<Acc>(p[i * xs]));
          q[i * os] = acc;
        }
      }
    });
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/reduction.cpp), with its signature, which the slot checks.
void add_reduce_kernels(detail::Backend& b) {
  b.kernels.fill("reduction.reduce", &cpu::reduce);
  b.kernels.fill("reduction.cumsum", &cpu::cumsum);
}

}  // namespace loom::cpu
