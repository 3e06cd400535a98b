// Gather/scatter kernels behind take, take_along_axis, scatter_add, index_put and nonzero.
// Indices arrive as int64, already wrapped and bounds-checked by the ops.
#include <algorithm>
#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/wrapping.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

// x viewed as (outer, n, inner) around `axis`, with element strides.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisView around(const Shape& s, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < axis; ++d) v.outer *= s[d];
  v.n = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) v.inner *= s[d];
  return v;
}

}  // namespace

// x, out, index contiguous (the op makes them so).
void take(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index) {
  const AxisView v = around(x.shape(), axis);
  const int64_t m = index.numel();
  const int64_t* idx = index.data<int64_t>();
  const size_t isz = x.itemsize();
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  const size_t row = static_cast<size_t>(v.inner) * isz;
  parallel_for(0, v.outer * m, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, v.inner)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / m, j = r % m;
      std::memcpy(dst + static_cast<size_t>(r) * row, src + static_cast<size_t>(o * v.n + idx[j]) * row, row);
    }
  });
}

void index_add(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src) {
  const AxisView v = around(dst.shape(), axis);
  const int64_t m = index.numel();
  const int64_t* idx = index.data<int64_t>();
  detail::dispatch_compute(dst.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst.data_ptr());
    const T* s = static_cast<const T*>(src.data_ptr());
    // parallel over outer rows and blocks of inner columns: repeated indices hit the same
    // row, so the index loop stays sequential inside a task. With few outer rows (axis 0, as
    // embedding gradients) the columns are split so that every thread gets a share.
    const int64_t threads = get_num_threads();
    int64_t blocks = 1;
    if (v.outer < threads && m * v.inner >= kGrain) blocks = std::min<int64_t>(threads, std::max<int64_t>(1, v.inner / 16));
    const int64_t width = (v.inner + blocks - 1) / blocks;
    parallel_for(0, v.outer * blocks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t o = t / blocks, i0 = (t % blocks) * width, i1 = std::min(v.inner, i0 + width);
        for (int64_t j = 0; j < m; ++j) {
          T* dr = d + (o * v.n + idx[j]) * v.inner;
          const T* sr = s + (o * m + j) * v.inner;
          for (int64_t i = i0; i < i1; ++i) dr[i] = wrapping_add(dr[i], sr[i]);
        }
      }
    });
  });
}

// Element offset in x of index element k: x's strides with index's multi-index, the value
// index[k] standing in on `axis`. index is contiguous.
template <typename F>
static void for_each_along(const Tensor& x, int64_t axis, const Tensor& index, F&& f) {
  const Shape& is = index.shape();
  const int64_t nd = index.ndim(), n = index.numel();
  const int64_t* idx = index.data<int64_t>();
  parallel_for(0, n, kGrain, [&](int64_t k0, int64_t k1) {
    std::vector<int64_t> mi(static_cast<size_t>(nd), 0);
    int64_t rem = k0;
    for (int64_t d = nd; d-- > 0;) { mi[d] = rem % is[d]; rem /= is[d]; }
    for (int64_t k = k0; k < k1; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += (d == axis ? idx[k] : mi[d]) * x.strides()[d];
      f(k, off);
      for (int64_t d = nd; d-- > 0;) {
        if (++mi[d] < is[d]) break;
        mi[d] = 0;
      }
    }
  });
}

void take_along(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index) {
  const auto isz = static_cast<int64_t>(x.itemsize());  // signed: offsets of reversed views are negative
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for_each_along(x, axis, index, [&](int64_t k, int64_t off) { std::memcpy(dst + k * isz, src + off * isz, isz); });
}

void scatter_add_along(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src) {
  detail::dispatch_compute(dst.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst.data_ptr());
    const T* s = static_cast<const T*>(src.data_ptr());
    const int64_t* idx = index.data<int64_t>();
    const Shape& is = index.shape();
    const int64_t nd = index.ndim(), n = index.numel();
    bool rows = axis == nd - 1 && dst.is_contiguous();
    for (int64_t q = 0; rows && q < axis; ++q) rows = is[q] == dst.shape()[q];
    if (rows) {
      // along the last axis with matching leading axes (max pooling's backward): index row r
      // only names elements of destination row r, so rows run in parallel
      const int64_t len = is[axis], dn = dst.shape()[axis], nrows = len > 0 ? n / len : 0;
      parallel_for(0, nrows, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, len)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          T* dr = d + r * dn;
          for (int64_t k = r * len; k < (r + 1) * len; ++k) dr[idx[k]] = wrapping_add(dr[idx[k]], s[k]);
        }
      });
      return;
    }
    // sequential: different index elements may name the same destination
    std::vector<int64_t> mi(static_cast<size_t>(nd), 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (int64_t q = 0; q < nd; ++q) off += (q == axis ? idx[k] : mi[q]) * dst.strides()[q];
      d[off] = wrapping_add(d[off], s[k]);
      for (int64_t q = nd; q-- > 0;) {
        if (++mi[q] < is[q]) break;
        mi[q] = 0;
      }
    }
  });
}

void put(const Tensor& dst, const Tensor& index, const Tensor& src) {
  const auto isz = static_cast<int64_t>(dst.itemsize());
  const int64_t* idx = index.data<int64_t>();
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  for (int64_t k = 0; k < index.numel(); ++k) std::memcpy(d + idx[k] * isz, s + k * isz, isz);
}

Tensor nonzero(const Tensor& x) {
  const int64_t nd = x.ndim();
  std::vector<int64_t> found;
  const int64_t n = x.numel();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  detail::dispatch_all(x.dtype(), "nonzero", [&](auto tag) {
    using T = decltype(tag);
    const T* base = static_cast<const T*>(x.data_ptr());
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += idx[d] * x.strides()[d];
      if (static_cast<float>(base[off]) != 0.0f || (std::is_integral_v<T> && base[off] != T{}))
        found.insert(found.end(), idx.begin(), idx.end());
      for (int64_t d = nd; d-- > 0;) {
        if (++idx[d] < x.shape()[d]) break;
        idx[d] = 0;
      }
    }
  });
  const int64_t count = nd ? static_cast<int64_t>(found.size()) / nd : (n && x.at({}) != 0 ? 1 : 0);
  Shape shape{count, nd};
  Tensor out(std::make_shared<Storage>(found.size() * 8, x.device()), shape, contiguous_strides(shape), 0, DType::Int64);
  if (!found.empty()) std::memcpy(out.data_ptr(), found.data(), found.size() * 8);
  return out;
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/indexing.cpp), with its signature, which the slot checks.
void add_index_kernels(detail::Backend& b) {
  b.kernels.fill("index.take", &cpu::take);
  b.kernels.fill("index.index_add", &cpu::index_add);
  b.kernels.fill("index.take_along", &cpu::take_along);
  b.kernels.fill("index.scatter_add_along", &cpu::scatter_add_along);
  b.kernels.fill("index.put", &cpu::put);
  b.kernels.fill("index.nonzero", &cpu::nonzero);
}

}  // namespace loom::cpu
