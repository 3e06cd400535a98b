#include "loom/ops/manipulation.h"

#include <algorithm>
#include <numeric>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"
#include "ops/registry_parts.h"

namespace loom {

using Grads = std::vector<Tensor>;

namespace {

Tensor view_of(const Tensor& x, Shape shape, Strides strides, int64_t offset) {
  return Tensor(x.storage(), std::move(shape), std::move(strides), offset, x.dtype());
}

// Strides that let `x` be seen with `shape` without copying, if any (NumPy's no-copy reshape).
std::optional<Strides> reshape_strides(const Tensor& x, const Shape& shape) {
  const Shape& os = x.shape();
  const Strides& ost = x.strides();
  if (x.numel() == 0 || x.is_contiguous()) return contiguous_strides(shape);
  // drop size-1 axes of the old shape
  Shape olds;
  Strides oldst;
  for (size_t i = 0; i < os.size(); ++i)
    if (os[i] != 1) {
      olds.push_back(os[i]);
      oldst.push_back(ost[i]);
    }
  Strides nst(shape.size(), 0);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  const size_t on = olds.size(), nn = shape.size();
  while (ni < nn && oi < on) {
    int64_t np = shape[ni], op = olds[oi];
    nj = ni + 1;
    oj = oi + 1;
    while (np != op) {
      if (np < op) np *= shape[nj++];
      else op *= olds[oj++];
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (oldst[k] != olds[k + 1] * oldst[k + 1]) return std::nullopt;
    nst[nj - 1] = oldst[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) nst[k - 1] = nst[k] * shape[k];
    ni = nj;
    oi = oj;
  }
  for (size_t k = ni; k < nn; ++k) nst[k] = 1;  // trailing size-1 axes
  return nst;
}

Shape resolve_shape(const Tensor& x, const Shape& shape) {
  Shape s = shape;
  int64_t infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) throw ShapeError("reshape: only one dimension can be -1, got " + shape_str(shape));
      infer = static_cast<int64_t>(i);
      s[i] = 1;
    } else if (s[i] < 0) {
      throw ShapeError("reshape: invalid size " + std::to_string(s[i]) + " in " + shape_str(shape));
    }
  }
  shape_nbytes(s, x.itemsize(), "reshape");
  const int64_t known = shape_numel(s);
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      throw ShapeError("reshape: cannot reshape a tensor of shape " + shape_str(x.shape()) + " (" +
                       std::to_string(x.numel()) + " elements) into " + shape_str(shape));
    s[infer] = x.numel() / known;
  }
  if (shape_numel(s) != x.numel())
    throw ShapeError("reshape: cannot reshape a tensor of shape " + shape_str(x.shape()) + " (" + std::to_string(x.numel()) +
                     " elements) into " + shape_str(shape) + " (" + std::to_string(shape_numel(s)) + " elements)");
  return s;
}

Axes normalize_perm(const Tensor& x, const Axes& axes, const char* op) {
  Axes p = axes;
  if (p.empty()) {
    p.resize(static_cast<size_t>(x.ndim()));
    std::iota(p.rbegin(), p.rend(), 0);
    return p;
  }
  if (static_cast<int64_t>(p.size()) != x.ndim())
    throw ValueError(std::string(op) + ": axes " + shape_str(axes) + " do not match a tensor of rank " + std::to_string(x.ndim()) +
                     " (give a permutation of 0.." + std::to_string(x.ndim() - 1) + ")");
  std::vector<bool> seen(p.size(), false);
  for (auto& a : p) {
    a = normalize_axis(a, x.ndim(), op);
    if (seen[a]) throw ValueError(std::string(op) + ": axes " + shape_str(axes) + " repeat an axis (give a permutation)");
    seen[a] = true;
  }
  return p;
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "reshape");
  const Shape s = resolve_shape(x, shape);
  Tensor y;
  if (auto st = reshape_strides(x, s)) {
    y = view_of(x, s, *st, x.offset());
  } else {
    Tensor c = detail::contiguous_raw(x);
    y = view_of(c, s, contiguous_strides(s), c.offset());
  }
  if (!detail::needs_grad({&x})) return y;
  return detail::record("reshape", {x}, y, [in = x.shape()](const Tensor& g) { return Grads{reshape(g, in)}; });
}

Tensor permute(const Tensor& x, const Axes& axes) {
  detail::check_defined(x, "permute");
  const Axes p = normalize_perm(x, axes, "permute");
  Shape s(p.size());
  Strides st(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    s[i] = x.shape()[p[i]];
    st[i] = x.strides()[p[i]];
  }
  Tensor y = view_of(x, s, st, x.offset());
  if (!detail::needs_grad({&x})) return y;
  Axes inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return detail::record("permute", {x}, y, [inv](const Tensor& g) { return Grads{permute(g, inv)}; });
}

Tensor transpose(const Tensor& x, const Axes& axes) { return permute(x, normalize_perm(x, axes, "transpose")); }

Tensor swapaxes(const Tensor& x, int64_t a, int64_t b) {
  Axes p(static_cast<size_t>(x.ndim()));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[normalize_axis(a, x.ndim(), "swapaxes")], p[normalize_axis(b, x.ndim(), "swapaxes")]);
  return permute(x, p);
}

Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination) {
  const int64_t s = normalize_axis(source, x.ndim(), "moveaxis"), d = normalize_axis(destination, x.ndim(), "moveaxis");
  Axes p;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (i != s) p.push_back(i);
  p.insert(p.begin() + d, s);
  return permute(x, p);
}

Tensor squeeze(const Tensor& x, const Axes& axes) {
  detail::check_defined(x, "squeeze");
  std::vector<bool> drop(static_cast<size_t>(x.ndim()), false);
  if (axes.empty()) {
    for (int64_t i = 0; i < x.ndim(); ++i) drop[i] = x.shape()[i] == 1;
  } else {
    for (int64_t a : axes) {
      const int64_t k = normalize_axis(a, x.ndim(), "squeeze");
      if (x.shape()[k] != 1)
        throw ShapeError("squeeze: axis " + std::to_string(a) + " of shape " + shape_str(x.shape()) +
                         " has size " + std::to_string(x.shape()[k]) + " (only size-1 axes can be squeezed)");
      drop[k] = true;
    }
  }
  Shape s;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (!drop[i]) s.push_back(x.shape()[i]);
  return reshape(x, s);
}

Tensor expand_dims(const Tensor& x, int64_t axis) {
  detail::check_defined(x, "expand_dims");
  const int64_t a = normalize_axis(axis, x.ndim() + 1, "expand_dims");
  Shape s = x.shape();
  s.insert(s.begin() + a, 1);
  return reshape(x, s);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "broadcast_to");
  shape_nbytes(shape, x.itemsize(), "broadcast_to");
  if (broadcast_shapes(x.shape(), shape, "broadcast_to") != shape || x.ndim() > static_cast<int64_t>(shape.size()))
    throw ShapeError("broadcast_to: a tensor of shape " + shape_str(x.shape()) + " cannot be broadcast to " + shape_str(shape) +
                     " (each axis must match or be 1, aligned from the right)");
  if (x.shape() == shape) return x;
  Tensor y = detail::broadcast_view(x, shape);
  if (!detail::needs_grad({&x})) return y;
  // the node sums the gradient back to x's shape
  return detail::record("broadcast_to", {x}, y, [](const Tensor& g) { return Grads{g}; });
}

Tensor flatten(const Tensor& x) { return reshape(x, {x.numel()}); }

Tensor slice(const Tensor& x, int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  detail::check_defined(x, "slice");
  const int64_t a = normalize_axis(axis, x.ndim(), "slice");
  if (step == 0) throw ValueError("slice: step must not be zero");
  const int64_t n = x.shape()[a];
  // Python's slice.indices()
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) -> int64_t {
    if (!v) return dflt;
    int64_t k = *v < 0 ? *v + n : *v;
    if (step > 0) return std::clamp<int64_t>(k, 0, n);
    return std::clamp<int64_t>(k, -1, n - 1);
  };
  const int64_t b = clamp(start, step > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, step > 0 ? n : -1);
  // ceil(|e - b| / |step|) without overflow for any step (-step overflows for INT64_MIN)
  const uint64_t ustep = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const int64_t dist = step > 0 ? e - b : b - e;
  const int64_t len = dist > 0 ? static_cast<int64_t>((static_cast<uint64_t>(dist) - 1) / ustep + 1) : 0;
  Shape s = x.shape();
  Strides st = x.strides();
  s[a] = len;
  const int64_t off = x.offset() + (len > 0 ? b * st[a] : 0);
  if (len > 1) st[a] *= step;  // |step| < n here, so the product stays inside the storage
  Tensor y = view_of(x, s, st, off);
  if (!detail::needs_grad({&x})) return y;
  return detail::record("slice", {x}, y, [in = x.shape(), a, b, step, len](const Tensor& g) {
    Tensor z = zeros(in, g.dtype(), g.device());
    if (len > 0) {
      Tensor dst = slice(z, a, b, std::nullopt, step);
      dst = slice(dst, a, 0, len, 1);
      detail::backend(g.device()).copy(dst, g);
    }
    return Grads{z};
  });
}

Tensor concatenate(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw ValueError("concatenate: needs at least one tensor");
  for (const Tensor& t : xs) detail::check_defined(t, "concatenate");
  const Tensor& f = xs[0];
  if (f.ndim() == 0) throw ShapeError("concatenate: zero-dimensional tensors cannot be concatenated (use stack)");
  const int64_t a = normalize_axis(axis, f.ndim(), "concatenate");
  DType dt = f.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    detail::check_same_device(f, t, "concatenate");
    bool ok = t.ndim() == f.ndim();
    for (int64_t d = 0; ok && d < f.ndim(); ++d)
      if (d != a && t.shape()[d] != f.shape()[d]) ok = false;
    if (!ok)
      throw ShapeError("concatenate: tensor " + std::to_string(i) + " has shape " + shape_str(t.shape()) +
                       " but tensor 0 has " + shape_str(f.shape()) + " (all axes but axis " + std::to_string(a) + " must match)");
    dt = promote_types(dt, t.dtype());
    total = checked_add(total, t.shape()[a], "concatenate");
  }
  Shape s = f.shape();
  s[a] = total;
  Tensor out = detail::alloc(s, dt, f.device());
  std::vector<int64_t> sizes;
  int64_t pos = 0;
  for (const Tensor& t : xs) {
    const int64_t k = t.shape()[a];
    NoGrad off;
    detail::backend(f.device()).copy(slice(out, a, pos, pos + k), t);
    sizes.push_back(k);
    pos += k;
  }
  if (!detail::needs_grad(xs)) return out;
  return detail::record("concatenate", xs, out, [sizes, a](const Tensor& g) {
    Grads gs;
    int64_t p = 0;
    for (int64_t k : sizes) {
      gs.push_back(slice(g, a, p, p + k));
      p += k;
    }
    return gs;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw ValueError("stack: needs at least one tensor");
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i].shape() != xs[0].shape())
      throw ShapeError("stack: tensor " + std::to_string(i) + " has shape " + shape_str(xs[i].shape()) +
                       " but tensor 0 has " + shape_str(xs[0].shape()) + " (all shapes must be equal)");
  const int64_t a = normalize_axis(axis, xs[0].ndim() + 1, "stack");
  std::vector<Tensor> ex;
  for (const Tensor& t : xs) ex.push_back(expand_dims(t, a));
  return concatenate(ex, a);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& indices, int64_t axis) {
  detail::check_defined(x, "split");
  const int64_t a = normalize_axis(axis, x.ndim(), "split");
  std::vector<Tensor> out;
  int64_t prev = 0;
  // numpy.split: part k is x[indices[k-1]:indices[k]] with Python slice semantics, so an
  // index below its predecessor gives an empty part and the next part starts from it
  for (int64_t i : indices) {
    out.push_back(slice(x, a, prev, i));
    prev = i;
  }
  out.push_back(slice(x, a, prev, std::nullopt));
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t sections, int64_t axis) {
  detail::check_defined(x, "split");
  const int64_t a = normalize_axis(axis, x.ndim(), "split");
  if (sections <= 0 || x.shape()[a] % sections != 0)
    throw ValueError("split: axis " + std::to_string(a) + " of size " + std::to_string(x.shape()[a]) +
                     " does not divide into " + std::to_string(sections) + " equal sections");
  std::vector<int64_t> idx;
  const int64_t step = x.shape()[a] / sections;
  for (int64_t i = 1; i < sections; ++i) idx.push_back(i * step);
  return split(x, idx, a);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t axis) {
  detail::check_defined(x, "unbind");
  const int64_t a = normalize_axis(axis, x.ndim(), "unbind");
  const int64_t n = x.shape()[a], stride = x.strides()[a];
  Shape s = x.shape();
  Strides st = x.strides();
  s.erase(s.begin() + a);
  st.erase(st.begin() + a);
  std::vector<Tensor> parts;
  parts.reserve(static_cast<size_t>(n));
  if (!detail::needs_grad({&x})) {
    for (int64_t i = 0; i < n; ++i) parts.push_back(view_of(x, s, st, x.offset() + i * stride));
    return parts;
  }
  // The parts hang off `whole`, a view of x. The first part whose rule runs in a pass makes the
  // gradient of x's shape and returns it to `whole` (the engine's reference is the only strong
  // one); the others write their slice into it and return none. The engine runs `whole` after
  // every part, so it passes the complete gradient on to x and forgets it. A pass that fails
  // in between drops the engine's reference, so the next pass starts afresh.
  auto gathered = std::make_shared<std::weak_ptr<TensorImpl>>();
  Tensor whole = detail::record("unbind", {x}, view_of(x, x.shape(), x.strides(), x.offset()),
                                [gathered](const Tensor& g) {
                                  gathered->reset();
                                  return Grads{g};
                                });
  for (int64_t i = 0; i < n; ++i) {
    parts.push_back(detail::record("unbind", {whole}, view_of(x, s, st, x.offset() + i * stride),
                                   [gathered, a, i, shape = x.shape(), dtype = x.dtype()](const Tensor& g) {
                                     Tensor total(gathered->lock());
                                     const bool first = !total.defined();
                                     if (first) {
                                       total = zeros(shape, dtype, g.device());
                                       *gathered = total.impl();
                                     }
                                     detail::backend(g.device()).copy(squeeze(slice(total, a, i, i + 1), {a}), g);
                                     return Grads{first ? total : Tensor()};
                                   }));
  }
  return parts;
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pw, Scalar value) {
  detail::check_defined(x, "pad");
  if (static_cast<int64_t>(pw.size()) != x.ndim())
    throw ValueError("pad: got " + std::to_string(pw.size()) + " (before, after) pairs for a tensor of rank " +
                     std::to_string(x.ndim()) + " (give one pair per axis)");
  Shape s = x.shape();
  for (size_t i = 0; i < pw.size(); ++i) {
    if (pw[i].first < 0 || pw[i].second < 0)
      throw ValueError("pad: negative padding on axis " + std::to_string(i) + " (valid: >= 0)");
    s[i] = checked_add(checked_add(s[i], pw[i].first, "pad"), pw[i].second, "pad");
  }
  Tensor out = full(s, value, x.dtype(), x.device());
  Tensor inner = out;
  {
    NoGrad off;
    for (size_t i = 0; i < pw.size(); ++i) inner = slice(inner, static_cast<int64_t>(i), pw[i].first, pw[i].first + x.shape()[i]);
    detail::backend(x.device()).copy(inner, x);
  }
  if (!detail::needs_grad({&x})) return out;
  return detail::record("pad", {x}, out, [pw, in = x.shape()](const Tensor& g) {
    Tensor r = g;
    for (size_t i = 0; i < pw.size(); ++i) r = slice(r, static_cast<int64_t>(i), pw[i].first, pw[i].first + in[i]);
    return Grads{r};
  });
}

Tensor tile(const Tensor& x, const std::vector<int64_t>& reps) {
  detail::check_defined(x, "tile");
  const size_t n = std::max(reps.size(), static_cast<size_t>(x.ndim()));
  Shape xs(n - x.shape().size(), 1);
  xs.insert(xs.end(), x.shape().begin(), x.shape().end());
  std::vector<int64_t> r(n - reps.size(), 1);
  r.insert(r.end(), reps.begin(), reps.end());
  // (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...) then merged
  Shape inter, target, final_shape;
  for (size_t i = 0; i < n; ++i) {
    if (r[i] < 0) throw ValueError("tile: repetitions must be >= 0, got " + std::to_string(r[i]));
    inter.push_back(1);
    inter.push_back(xs[i]);
    target.push_back(r[i]);
    target.push_back(xs[i]);
    final_shape.push_back(checked_mul(r[i], xs[i], "tile"));
  }
  return reshape(broadcast_to(reshape(x, inter), target), final_shape);
}

Tensor repeat(const Tensor& x, int64_t repeats, std::optional<int64_t> axis) {
  detail::check_defined(x, "repeat");
  if (repeats < 0) throw ValueError("repeat: repeats must be >= 0, got " + std::to_string(repeats));
  if (!axis) return repeat(flatten(x), repeats, 0);
  const int64_t a = normalize_axis(*axis, x.ndim(), "repeat");
  Tensor e = expand_dims(x, a + 1);
  Shape target = e.shape();
  target[a + 1] = repeats;
  Shape final_shape = x.shape();
  final_shape[a] = checked_mul(final_shape[a], repeats, "repeat");
  return reshape(broadcast_to(e, target), final_shape);
}

Tensor flip(const Tensor& x, const Axes& axes) {
  detail::check_defined(x, "flip");
  std::vector<bool> f(static_cast<size_t>(x.ndim()), axes.empty());
  for (int64_t a : axes) f[normalize_axis(a, x.ndim(), "flip")] = true;
  Strides st = x.strides();
  int64_t off = x.offset();
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (f[i] && x.shape()[i] > 0) {
      off += (x.shape()[i] - 1) * st[i];
      st[i] = -st[i];
    }
  Tensor y = view_of(x, x.shape(), st, off);
  if (!detail::needs_grad({&x})) return y;
  return detail::record("flip", {x}, y, [axes](const Tensor& g) { return Grads{flip(g, axes)}; });
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> manipulation_ops() {
  return {
      {"reshape", "manipulation", true}, {"transpose", "manipulation", true}, {"squeeze", "manipulation", true},
      {"expand_dims", "manipulation", true}, {"broadcast_to", "manipulation", true}, {"slice", "manipulation", true},
      {"concatenate", "manipulation", true}, {"stack", "manipulation", true}, {"split", "manipulation", true},
      {"pad", "manipulation", true}, {"tile", "manipulation", true}, {"repeat", "manipulation", true},
      {"flip", "manipulation", true},
  };
}

}  // namespace loom::detail
