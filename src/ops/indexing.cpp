#include "loom/ops/indexing.h"

#include <algorithm>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/indexing_internal.h"
#include "ops/internal.h"
#include "ops/registry_parts.h"

namespace loom {

namespace detail {
// (shared with nn.cpp: ops/indexing_internal.h, where its contract is)
constinit const KernelSlot<void(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src)> kIndexAdd{
    "index.index_add"};
}  // namespace detail

using Grads = std::vector<Tensor>;
using detail::kIndexAdd;
using detail::KernelSlot;

// The indexing kernels' other slots, declared beside their ops (src/ops/backend.h, KernelSlot),
// filled by src/ops/cpu/index.cpp.
// out = x.take(index, axis) with out.shape = x.shape[:axis] + index.shape + x.shape[axis+1:].
static constinit const KernelSlot<void(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index)> kTake{
    "index.take"};
// out[..i..] = x[.. index[..i..] ..] along axis (index and out same shape); scatter_add_along is
// its adjoint: dst[.. index[..i..] ..] += src[..i..] along axis.
static constinit const KernelSlot<void(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index)>
    kTakeAlong{"index.take_along"};
static constinit const KernelSlot<void(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src)>
    kScatterAddAlong{"index.scatter_add_along"};
// dst_flat[index[i]] = src[i] in order (a later duplicate wins); 1-d contiguous operands.
static constinit const KernelSlot<void(const Tensor& dst_flat, const Tensor& index, const Tensor& src)> kPut{"index.put"};
// Positions of non-zero elements of x: an int64 tensor of shape (count, ndim).
static constinit const KernelSlot<Tensor(const Tensor& x)> kNonzero{"index.nonzero"};

namespace {

// Integer index array as contiguous int64 with negative values wrapped; throws IndexError
// naming the first out-of-range value.
Tensor checked_indices(const Tensor& idx, int64_t n, const char* op, int64_t axis) {
  if (!is_integral(idx.dtype()))
    throw DTypeError(std::string(op) + ": indices must be integers or a boolean mask, got " + dtype_name(idx.dtype()));
  NoGrad off;
  Tensor i = detail::contiguous_raw(detail::cast_raw(idx, DType::Int64));
  Tensor bad = logical_or(less(i, scalar_tensor(-n, DType::Int64, i.device())), greater_equal(i, scalar_tensor(n, DType::Int64, i.device())));
  if (i.numel() > 0 && any(bad).item<bool>()) {
    const int64_t first = take(flatten(i), argmax(flatten(bad))).item<int64_t>();
    throw IndexError(std::string(op) + ": index " + std::to_string(first) + " is out of bounds for axis " +
                     std::to_string(axis) + " with size " + std::to_string(n) + " (valid: " + std::to_string(-n) +
                     " to " + std::to_string(n - 1) + ")");
  }
  Tensor wrapped = where(less(i, scalar_tensor(0, DType::Int64, i.device())), add(i, scalar_tensor(n, DType::Int64, i.device())), i);
  return detail::contiguous_raw(wrapped);
}

Tensor take_checked(const Tensor& x, const Tensor& idx, int64_t a) {
  // idx: contiguous int64, already wrapped
  Shape s(x.shape().begin(), x.shape().begin() + a);
  s.insert(s.end(), idx.shape().begin(), idx.shape().end());
  s.insert(s.end(), x.shape().begin() + a + 1, x.shape().end());
  Tensor out = detail::alloc(s, x.dtype(), x.device());
  if (out.numel() > 0) kTake(x.device())(out, detail::contiguous_raw(x), a, idx);
  if (!detail::needs_grad({&x})) return out;
  return detail::record("take", {x}, out, [idx, a, in = x.shape()](const Tensor& g) {
    Tensor z = zeros(in, g.dtype(), g.device());
    if (g.numel() > 0) kIndexAdd(g.device())(z, a, idx, detail::contiguous_raw(g));
    return Grads{z};
  });
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& indices, std::optional<int64_t> axis) {
  detail::check_defined(x, "take");
  detail::check_defined(indices, "take");
  detail::check_same_device(x, indices, "take");
  if (!axis) return take(flatten(x), indices, 0);
  const int64_t a = normalize_axis(*axis, x.ndim(), "take");
  return take_checked(x, checked_indices(indices, x.shape()[a], "take", a), a);
}

namespace {
// Shapes for take_along_axis: x and indices broadcast on all axes but `a`.
void along_shapes(const Tensor& x, const Tensor& idx, int64_t a, const char* op, Shape& xs, Shape& is) {
  if (idx.ndim() != x.ndim())
    throw ShapeError(std::string(op) + ": indices of rank " + std::to_string(idx.ndim()) + " for a tensor of rank " +
                     std::to_string(x.ndim()) + " (ranks must match)");
  Shape x1 = x.shape(), i1 = idx.shape();
  x1[a] = 1;
  i1[a] = 1;
  const Shape b = broadcast_shapes(x1, i1, op);
  xs = b;
  xs[a] = x.shape()[a];
  is = b;
  is[a] = idx.shape()[a];
}
}  // namespace

Tensor take_along_axis(const Tensor& x, const Tensor& indices, int64_t axis) {
  detail::check_defined(x, "take_along_axis");
  detail::check_defined(indices, "take_along_axis");
  const int64_t a = normalize_axis(axis, x.ndim(), "take_along_axis");
  Shape xs, is;
  along_shapes(x, indices, a, "take_along_axis", xs, is);
  Tensor xb = broadcast_to(x, xs);
  Tensor idx = detail::contiguous_raw(broadcast_to(checked_indices(indices, x.shape()[a], "take_along_axis", a), is));
  Tensor out = detail::alloc(is, x.dtype(), x.device());
  if (out.numel() > 0) kTakeAlong(x.device())(out, xb, a, idx);
  if (!detail::needs_grad({&xb})) return out;
  return detail::record("take_along_axis", {xb}, out, [idx, a, xs](const Tensor& g) {
    Tensor z = zeros(xs, g.dtype(), g.device());
    if (g.numel() > 0) kScatterAddAlong(g.device())(z, a, idx, detail::contiguous_raw(g));
    return Grads{z};
  });
}

Tensor gather(const Tensor& x, int64_t axis, const Tensor& indices) {
  // torch.gather: indices may be smaller than x on the other axes; x is cut to match.
  detail::check_defined(x, "gather");
  detail::check_defined(indices, "gather");
  const int64_t a = normalize_axis(axis, x.ndim(), "gather");
  if (indices.ndim() != x.ndim())
    throw ShapeError("gather: indices of rank " + std::to_string(indices.ndim()) + " for a tensor of rank " + std::to_string(x.ndim()));
  Tensor v = x;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d == a) continue;
    if (indices.shape()[d] > x.shape()[d])
      throw ShapeError("gather: indices shape " + shape_str(indices.shape()) + " exceeds the tensor's shape " +
                       shape_str(x.shape()) + " on axis " + std::to_string(d));
    if (indices.shape()[d] < x.shape()[d]) v = slice(v, d, 0, indices.shape()[d]);
  }
  return take_along_axis(v, indices, a);
}

Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& indices, const Tensor& src) {
  detail::check_defined(x, "scatter_add");
  detail::check_defined(indices, "scatter_add");
  detail::check_defined(src, "scatter_add");
  const int64_t a = normalize_axis(axis, x.ndim(), "scatter_add");
  if (indices.ndim() != x.ndim() || src.ndim() != x.ndim())
    throw ShapeError("scatter_add: x, indices and src must have one rank, got " + detail::describe_operands({&x, &indices, &src}));
  Tensor s = src;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (indices.shape()[d] > src.shape()[d] || (d != a && indices.shape()[d] > x.shape()[d]))
      throw ShapeError("scatter_add: indices shape " + shape_str(indices.shape()) + " must not exceed src " +
                       shape_str(src.shape()) + " on any axis, nor x " + shape_str(x.shape()) + " off axis " + std::to_string(a));
    if (indices.shape()[d] < src.shape()[d]) s = slice(s, d, 0, indices.shape()[d]);
  }
  Tensor idx = checked_indices(indices, x.shape()[a], "scatter_add", a);
  const DType dt = x.dtype();
  Tensor out = detail::contiguous_raw(x).copy();
  Tensor sc = detail::contiguous_raw(detail::cast_raw(s, dt));
  if (idx.numel() > 0) kScatterAddAlong(x.device())(out, a, idx, sc);
  if (!detail::needs_grad({&x, &s})) return out;
  return detail::record("scatter_add", {x, s}, out, [idx, a](const Tensor& g) {
    Tensor gs = detail::alloc(idx.shape(), g.dtype(), g.device());
    if (gs.numel() > 0) kTakeAlong(g.device())(gs, g, a, idx);
    return Grads{g, gs};
  });
}

std::vector<Tensor> nonzero(const Tensor& x) {
  detail::check_defined(x, "nonzero");
  Tensor pos = kNonzero(x.device())(x);  // (count, ndim)
  std::vector<Tensor> out;
  NoGrad off;
  for (int64_t d = 0; d < x.ndim(); ++d) out.push_back(detail::contiguous_raw(slice(pos, 1, d, d + 1).reshape({pos.shape()[0]})));
  return out;
}

// ------------------------------------------------------------------ x[indices]
namespace {

struct Advanced {
  int64_t axis;  // axis of the view after basic indexing
  Tensor index;  // integer array
};

// Applies the basic part (integers, slices, NewAxis, Ellipsis) as views and collects the
// integer arrays (boolean masks become one array per masked axis).
Tensor apply_basic(const Tensor& x, const std::vector<TensorIndex>& indices, std::vector<Advanced>& adv) {
  int64_t consumed = 0, ellipses = 0;
  bool has_array = false;
  for (const auto& ix : indices) {
    has_array = has_array || ix.is_tensor() || ix.is_bool();
    if (ix.is_int() || ix.is_slice()) ++consumed;
    else if (ix.is_tensor()) consumed += ix.tensor().dtype() == DType::Bool ? ix.tensor().ndim() : 1;
    else if (ix.is_ellipsis()) ++ellipses;
  }
  if (ellipses > 1) throw IndexError("index: an index can only have a single Ellipsis");
  if (consumed > x.ndim())
    throw IndexError("index: too many indices for a tensor of shape " + shape_str(x.shape()) + ": " +
                     std::to_string(consumed) + " axes indexed, " + std::to_string(x.ndim()) + " available");
  Tensor v = x;
  int64_t d = 0;  // current axis of v
  int64_t src_axis = 0;  // axis of x being indexed (for messages)
  for (const auto& ix : indices) {
    if (ix.is_int()) {
      const int64_t n = v.shape()[d];
      int64_t i = ix.integer();
      if (i < -n || i >= n)
        throw IndexError("index: index " + std::to_string(i) + " is out of bounds for axis " + std::to_string(src_axis) +
                         " with size " + std::to_string(n) + " (valid: " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")");
      if (i < 0) i += n;
      if (has_array) {
        // Next to an index array an integer is a 0-d index array (NumPy): it takes part in
        // deciding whether the array indices are adjacent, e.g. x[1, :, [0, 2]] has shape (2, 3).
        adv.push_back({d, scalar_tensor(i, DType::Int64, x.device())});
        ++d;
      } else {
        v = squeeze(slice(v, d, i, i + 1), {d});
      }
      ++src_axis;
    } else if (ix.is_slice()) {
      const Slice& s = ix.slice();
      v = slice(v, d, s.start, s.stop, s.step);
      ++d;
      ++src_axis;
    } else if (ix.is_newaxis()) {
      v = expand_dims(v, d);
      ++d;
    } else if (ix.is_ellipsis()) {
      d += x.ndim() - consumed;
      src_axis += x.ndim() - consumed;
    } else if (ix.is_bool() || (ix.tensor().dtype() == DType::Bool && ix.tensor().ndim() == 0)) {
      // NumPy: a 0-d mask indexes a new axis of size 1 (true) or 0 (false) and consumes none;
      // it is an index array of that length (all zeros) on an inserted axis
      const bool keep = ix.is_bool() ? ix.boolean() : ix.tensor().item<bool>();
      v = expand_dims(v, d);
      adv.push_back({d, zeros({keep ? 1 : 0}, DType::Int64, x.device())});
      ++d;
    } else {
      const Tensor& t = ix.tensor();
      if (t.dtype() == DType::Bool) {
        for (int64_t k = 0; k < t.ndim(); ++k)
          if (t.shape()[k] != v.shape()[d + k])
            throw IndexError("index: boolean mask of shape " + shape_str(t.shape()) + " does not match axes " +
                             std::to_string(src_axis) + ".." + std::to_string(src_axis + t.ndim() - 1) + " of shape " +
                             shape_str(x.shape()) + " (the mask's shape must equal the indexed axes)");
        std::vector<Tensor> nz = nonzero(t);
        for (int64_t k = 0; k < t.ndim(); ++k) adv.push_back({d + k, nz[k]});
        d += t.ndim();
        src_axis += t.ndim();
      } else {
        adv.push_back({d, checked_indices(t, v.shape()[d], "index", src_axis)});
        ++d;
        ++src_axis;
      }
    }
  }
  return v;
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices) {
  detail::check_defined(x, "index");
  std::vector<Advanced> adv;
  Tensor v = apply_basic(x, indices, adv);
  if (adv.empty()) return v;
  // broadcast the arrays together
  Shape b = adv[0].index.shape();
  for (const auto& a : adv) b = broadcast_shapes(b, a.index.shape(), "index (index arrays)");
  bool adjacent = true;
  for (size_t k = 1; k < adv.size(); ++k)
    if (adv[k].axis != adv[k - 1].axis + 1) adjacent = false;
  // permute advanced axes to the front, merge them, and take along axis 0
  Axes perm, rest;
  std::vector<bool> is_adv(static_cast<size_t>(v.ndim()), false);
  for (const auto& a : adv) {
    perm.push_back(a.axis);
    is_adv[a.axis] = true;
  }
  for (int64_t k = 0; k < v.ndim(); ++k)
    if (!is_adv[k]) rest.push_back(k);
  perm.insert(perm.end(), rest.begin(), rest.end());
  Tensor lin;
  int64_t merged = 1;
  {
    NoGrad off;
    for (size_t k = adv.size(); k-- > 0;) {
      Tensor term = multiply(adv[k].index, scalar_tensor(merged, DType::Int64, x.device()));
      lin = lin.defined() ? add(lin, term) : term;
      merged *= v.shape()[adv[k].axis];
    }
    lin = detail::contiguous_raw(broadcast_to(lin, b));
  }
  Shape merged_shape{merged};
  for (int64_t k : rest) merged_shape.push_back(v.shape()[k]);
  Tensor out = take_checked(reshape(permute(v, perm), merged_shape), lin, 0);
  const int64_t first = adv[0].axis;
  if (adjacent && first > 0) {
    // NumPy puts the broadcast axes where the (adjacent) indexed axes were
    const int64_t nb = static_cast<int64_t>(b.size());
    Axes p;
    for (int64_t k = 0; k < first; ++k) p.push_back(nb + k);
    for (int64_t k = 0; k < nb; ++k) p.push_back(k);
    for (int64_t k = nb + first; k < out.ndim(); ++k) p.push_back(k);
    out = permute(out, p);
  }
  return out;
}

Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values, bool accumulate) {
  detail::check_defined(x, "index_put");
  detail::check_defined(values, "index_put");
  // positions of the indexed elements in x's row-major order
  Tensor pos;
  {
    NoGrad off;
    pos = detail::contiguous_raw(index(reshape(arange(x.numel(), DType::Int64, x.device()), x.shape()), indices));
  }
  if (broadcast_shapes(values.shape(), pos.shape(), "index_put") != pos.shape())
    throw ShapeError("index_put: values of shape " + shape_str(values.shape()) + " cannot be broadcast to the indexed shape " +
                     shape_str(pos.shape()));
  Tensor flat_pos = reshape(pos, {pos.numel()});
  Tensor vals = detail::contiguous_raw(detail::broadcast_view(detail::cast_raw(values, x.dtype()), pos.shape()));
  Tensor out = detail::contiguous_raw(x).copy();
  Tensor out_flat(out.storage(), {out.numel()}, {1}, 0, out.dtype());
  Tensor vals_flat(vals.storage(), {vals.numel()}, {1}, vals.offset(), vals.dtype());
  if (flat_pos.numel() > 0) {
    if (accumulate) kIndexAdd(x.device())(out_flat, 0, flat_pos, vals_flat);
    else kPut(x.device())(out_flat, flat_pos, vals_flat);
  }
  if (!detail::needs_grad({&x, &values})) return out;
  return detail::record("index_put", {x, values}, out, [flat_pos, pshape = pos.shape(), accumulate](const Tensor& g) {
    Tensor gflat = reshape(g, {g.numel()});
    Tensor gv = reshape(take(gflat, flat_pos, 0), pshape);
    Tensor gx = g;
    if (!accumulate) {
      Tensor z = zeros({flat_pos.numel()}, g.dtype(), g.device());
      Tensor gc = detail::contiguous_raw(g).copy();
      Tensor gc_flat(gc.storage(), {gc.numel()}, {1}, 0, gc.dtype());
      if (flat_pos.numel() > 0) kPut(g.device())(gc_flat, flat_pos, z);
      gx = gc;
    }
    return Grads{gx, gv};
  });
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> indexing_ops() {
  return {
      {"index", "indexing", true}, {"take", "indexing", true}, {"take_along_axis", "indexing", true},
      {"scatter_add", "indexing", true}, {"index_put", "indexing", true},
  };
}

}  // namespace loom::detail
