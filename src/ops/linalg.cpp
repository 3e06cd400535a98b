#include "loom/ops/linalg.h"

#include <numeric>

#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"
#include "ops/registry_parts.h"

namespace loom {

using Grads = std::vector<Tensor>;

namespace {

// The products' slots, declared beside their ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/matmul.cpp. out[b] = a[b] @ b[b] for 3-d operands of equal batch size.
constinit const detail::KernelSlot<void(const Tensor& out, const Tensor& a, const Tensor& b)> kMatmul{"linalg.matmul"};
// The same plus bias (out's last axis) on every row, bit for bit matmul then add; false (and
// nothing written) where the backend has no such path for these operands. Unfilled (if_filled):
// linear runs matmul then add.
constinit const detail::KernelSlot<bool(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias)>
    kMatmulBias{"linalg.matmul_bias"};

// a (..., M, K) @ b (..., K, N) with broadcast batch axes; both at least 2-d.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const int64_t M = a.shape()[a.ndim() - 2], K = a.shape()[a.ndim() - 1];
  const int64_t K2 = b.shape()[b.ndim() - 2], N = b.shape()[b.ndim() - 1];
  if (K != K2)
    throw ShapeError("matmul: inner dimensions differ: " + detail::describe_operands({&a, &b}) + " (a's last axis, " +
                     std::to_string(K) + ", must equal b's second-to-last axis, " + std::to_string(K2) + ")");
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul (batch axes)");
  const int64_t nb = shape_numel(batch);
  DType dt = promote_types(a.dtype(), b.dtype());
  const DType kd = detail::kernel_dtype(dt);
  shape_nbytes({nb, M, N}, itemsize(kd), "matmul");  // two valid operands can make an overflowing result
  auto as3 = [&](const Tensor& t, int64_t r, int64_t c) {
    Shape full = batch;
    full.push_back(r);
    full.push_back(c);
    Tensor v = detail::broadcast_view(detail::cast_raw(t, kd), full);
    // collapse batch axes into one when the strides allow, else copy
    Shape s3{nb, r, c};
    Tensor flat;
    {
      NoGrad off;
      flat = reshape(v, s3);
    }
    return flat;
  };
  Tensor a3 = as3(a, M, K), b3 = as3(b, K, N);
  Tensor out = detail::alloc({nb, M, N}, kd, a.device());
  kMatmul(a.device())(out, a3, b3);
  Shape os = batch;
  os.push_back(M);
  os.push_back(N);
  Tensor y = detail::cast_raw(Tensor(out.storage(), os, contiguous_strides(os), 0, kd), dt);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("matmul", {a, b}, y, [ad = detail::save(a), bd = detail::save(b), ra = a.requires_grad(),
                                              rb = b.requires_grad()](const Tensor& g) {
    // b's gradient first (a weight's, in a layer): its product's scratch (K in parts, cpu
    // matmul.cpp) is then freed before a's gradient, an activation's size, is allocated
    Tensor gb = rb ? matmul_nd(swapaxes(ad, -1, -2), g) : Tensor();
    Tensor ga = ra ? matmul_nd(g, swapaxes(bd, -1, -2)) : Tensor();
    return Grads{std::move(ga), std::move(gb)};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "matmul");
  detail::check_defined(b, "matmul");
  detail::check_same_device(a, b, "matmul");
  if (a.ndim() == 0 || b.ndim() == 0)
    throw ShapeError("matmul: operands must have at least one axis (" + detail::describe_operands({&a, &b}) +
                     "); use multiply for scalars");
  const bool va = a.ndim() == 1, vb = b.ndim() == 1;
  Tensor a2 = va ? expand_dims(a, 0) : a;
  Tensor b2 = vb ? expand_dims(b, 1) : b;
  Tensor y;
  if (a2.ndim() > 2 && b2.ndim() == 2) {
    // fold a's batch axes into its rows: one GEMM, and b is never broadcast
    Shape os(a2.shape().begin(), a2.shape().end() - 1);
    const int64_t rows = shape_numel(os);  // not -1: it is ambiguous when K == 0
    os.push_back(b2.shape()[1]);
    y = reshape(matmul_nd(reshape(a2, {rows, a2.shape().back()}), b2), os);
  } else {
    y = matmul_nd(a2, b2);
  }
  if (va) y = squeeze(y, {-2});
  if (vb) y = squeeze(y, {-1});
  return y;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  detail::check_defined(x, "linear");
  detail::check_defined(w, "linear");
  detail::check_defined(bias, "linear");
  const auto fused = kMatmulBias.if_filled(x.device());
  const bool fast = fused && x.ndim() >= 2 && w.ndim() == 2 && bias.ndim() == 1 && x.dtype() == DType::Float32 &&
                    w.dtype() == DType::Float32 && bias.dtype() == DType::Float32 && x.device() == w.device() &&
                    x.device() == bias.device() && x.shape().back() == w.shape()[0] && bias.shape()[0] == w.shape()[1] &&
                    x.numel() > 0 && w.numel() > 0;
  if (!fast) return add(matmul(x, w), bias);
  const int64_t K = w.shape()[0], N = w.shape()[1], rows = x.numel() / K;
  Tensor x2, x3, w3;
  {
    NoGrad off;
    x2 = reshape(x, {rows, K});
    x3 = reshape(x2, {1, rows, K});
    w3 = reshape(w, {1, K, N});
  }
  Tensor out = detail::alloc({1, rows, N}, DType::Float32, x.device());
  if (!fused(out, x3, w3, detail::contiguous_raw(bias))) return add(matmul(x, w), bias);
  Shape os(x.shape().begin(), x.shape().end() - 1);
  os.push_back(N);
  Tensor y(out.storage(), os, contiguous_strides(os), 0, DType::Float32);
  if (!detail::needs_grad({&x, &w, &bias})) return y;
  // the rules of reshape, matmul and add, as the composite records them
  return detail::record("linear", {x, w, bias}, y,
                        [xd = detail::save(x2), wd = detail::save(w), xs = x.shape(), rows, N, rx = x.requires_grad(),
                         rw = w.requires_grad(), rb = bias.requires_grad()](const Tensor& g) {
                          const Tensor g2 = reshape(g, {rows, N});
                          // the weight's gradient first: its product's scratch (K in parts,
                          // matmul.cpp) is then freed before the input's gradient is allocated
                          Tensor gw = rw ? matmul(swapaxes(xd.get(), -1, -2), g2) : Tensor();
                          Tensor gx = rx ? reshape(matmul(g2, swapaxes(wd.get(), -1, -2)), xs) : Tensor();
                          return Grads{std::move(gx), std::move(gw), rb ? g : Tensor()};
                        });
}

Tensor dot(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "dot");
  detail::check_defined(b, "dot");
  if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b);
  if (a.ndim() <= 2 && b.ndim() <= 2) return matmul(a, b);
  return tensordot(a, b, Axes{-1}, Axes{b.ndim() >= 2 ? -2 : -1});
}

Tensor outer(const Tensor& a, const Tensor& b) {
  return multiply(expand_dims(flatten(a), 1), expand_dims(flatten(b), 0));
}

Tensor tensordot(const Tensor& a, const Tensor& b, const Axes& axes_a, const Axes& axes_b) {
  detail::check_defined(a, "tensordot");
  detail::check_defined(b, "tensordot");
  if (axes_a.size() != axes_b.size())
    throw ValueError("tensordot: " + std::to_string(axes_a.size()) + " axes of a paired with " +
                     std::to_string(axes_b.size()) + " axes of b (give the same number)");
  std::vector<bool> ca(static_cast<size_t>(a.ndim()), false), cb(static_cast<size_t>(b.ndim()), false);
  Axes pa, pb;
  int64_t k = 1;
  for (size_t i = 0; i < axes_a.size(); ++i) {
    const int64_t x = normalize_axis(axes_a[i], a.ndim(), "tensordot"), y = normalize_axis(axes_b[i], b.ndim(), "tensordot");
    if (a.shape()[x] != b.shape()[y])
      throw ShapeError("tensordot: axis " + std::to_string(x) + " of a (size " + std::to_string(a.shape()[x]) +
                       ") and axis " + std::to_string(y) + " of b (size " + std::to_string(b.shape()[y]) + ") differ");
    ca[x] = cb[y] = true;
    k *= a.shape()[x];
  }
  Axes free_a, free_b;
  Shape out_shape;
  int64_t m = 1, n = 1;
  for (int64_t i = 0; i < a.ndim(); ++i)
    if (!ca[i]) { free_a.push_back(i); out_shape.push_back(a.shape()[i]); m *= a.shape()[i]; }
  for (int64_t i = 0; i < b.ndim(); ++i)
    if (!cb[i]) { free_b.push_back(i); out_shape.push_back(b.shape()[i]); n *= b.shape()[i]; }
  for (size_t i = 0; i < axes_a.size(); ++i) {
    free_a.push_back(normalize_axis(axes_a[i], a.ndim(), "tensordot"));
  }
  Axes perm_b;
  for (size_t i = 0; i < axes_b.size(); ++i) perm_b.push_back(normalize_axis(axes_b[i], b.ndim(), "tensordot"));
  perm_b.insert(perm_b.end(), free_b.begin(), free_b.end());
  Tensor a2 = reshape(permute(a, free_a), {m, k});
  Tensor b2 = reshape(permute(b, perm_b), {k, n});
  return reshape(matmul(a2, b2), out_shape);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t axes) {
  if (axes < 0 || axes > a.ndim() || axes > b.ndim())
    throw ValueError("tensordot: cannot contract " + std::to_string(axes) + " axes of tensors of rank " +
                     std::to_string(a.ndim()) + " and " + std::to_string(b.ndim()));
  Axes xa, xb;
  for (int64_t i = 0; i < axes; ++i) {
    xa.push_back(a.ndim() - axes + i);
    xb.push_back(i);
  }
  return tensordot(a, b, xa, xb);
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> linalg_ops() {
  return {
      {"matmul", "linalg", true}, {"linear", "linalg", true}, {"dot", "linalg", true}, {"outer", "linalg", true},
      {"tensordot", "linalg", true},
  };
}

}  // namespace loom::detail
