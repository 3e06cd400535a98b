// dropout and embedding.
#include "loom/ops/nn.h"

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/indexing_internal.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

using Grads = std::vector<Tensor>;

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  const char* op = "dropout";
  detail::check_defined(x, op);
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(std::string(op) + ": p must be in [0, 1], got " + std::to_string(p));
  detail::check_float(x, op, "input x");
  if (!training || p == 0.0) return x;
  if (p == 1.0) return multiply(x, zeros({}, x.dtype(), x.device()));
  // keep with probability 1 - p, scaled so that the expectation is x
  Tensor mask = bernoulli(x.shape(), 1.0 - p, x.dtype(), x.device(), gen);
  {
    NoGrad off;
    mask = multiply(mask, scalar_tensor(1.0 / (1.0 - p), x.dtype(), x.device()));
  }
  return multiply(x, mask);
}

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx) {
  const char* op = "embedding";
  detail::check_rank(weight, 2, op, "weight", "(num_embeddings, dim)");
  detail::check_defined(ids, op);
  detail::check_same_device(weight, ids, op);
  if (!is_integral(ids.dtype()))
    throw DTypeError(std::string(op) + ": ids must be integers, got " + describe(ids) +
                     " (valid: uint8, int32, int64)");
  const int64_t n = weight.shape()[0];
  if (padding_idx >= n)
    throw ValueError(std::string(op) + ": padding_idx " + std::to_string(padding_idx) + " is out of range for weight " +
                     describe(weight) + " (valid: 0 to " + std::to_string(n - 1) + ", or negative for none)");
  Tensor idx;
  {
    NoGrad off;
    idx = detail::contiguous_raw(detail::cast_raw(ids, DType::Int64));
    if (idx.numel() > 0) {
      const int64_t lo = min(idx).item<int64_t>(), hi = max(idx).item<int64_t>();
      if (lo < 0 || hi >= n)
        throw IndexError(std::string(op) + ": id " + std::to_string(lo < 0 ? lo : hi) +
                         " is out of range for weight " + describe(weight) + " (valid ids: 0 to " +
                         std::to_string(n - 1) + ")");
    }
  }
  Tensor out;
  {
    NoGrad off;
    out = take(weight, idx, 0);
  }
  if (!detail::needs_grad({&weight})) return out;
  const detail::SavedTensor saved = detail::save(idx);
  // g's rows with the padding id's rows zeroed (they add nothing to the table)
  auto masked = [saved, padding_idx](const Tensor& g) {
    if (padding_idx < 0) return g;
    const Tensor& i = saved.get();
    return where(expand_dims(not_equal(i, scalar_tensor(padding_idx, DType::Int64, i.device())), -1), g,
                 zeros({}, g.dtype(), g.device()));
  };
  // Adds the rows of gm into `table` with one row-wise index_add; repeated ids add up.
  auto add_rows = [saved](const Tensor& gm, const Tensor& table) {
    const int64_t m = saved.get().numel();
    if (m == 0) return;
    Tensor rows = detail::contiguous_raw(gm.astype(table.dtype())).reshape({m, table.shape()[1]});
    detail::kIndexAdd(table.device())(table, 0, saved.get().reshape({m}), rows);
  };
  auto rule = [saved, masked, add_rows, wshape = weight.shape()](const Tensor& g) {
    Tensor gm = masked(g);
    if (!detail::needs_grad({&gm})) {
      // Fast path (backward runs without recording, docs/autograd.md): the rows into a zero
      // table. index_put below builds an int64 position for every element of the table
      // (arange over num_embeddings * dim), which made this 60x slower for a 50000 x 128 table
      // (docs/benchmarks.md, word2vec).
      Tensor z = zeros(wshape, g.dtype(), g.device());
      add_rows(gm, z);
      return Grads{z};
    }
    // index_put with accumulate: repeated ids add up, and the rule stays differentiable in g
    return Grads{index_put(zeros(wshape, g.dtype(), g.device()), {TensorIndex(saved.get())}, gm, true)};
  };
  // A table that another lookup's gradient already reached takes these rows in place.
  auto into = [masked, add_rows](const Tensor& g, Tensor& sum) {
    if (detail::needs_grad({&g}) || g.dtype() != sum.dtype()) return false;  // before masking: no work wasted
    add_rows(masked(g), sum);
    return true;
  };
  return detail::record(op, weight, out, rule, into);
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> nn_ops() {
  return {
      {"dropout", "nn", true}, {"embedding", "nn", true},
  };
}

}  // namespace loom::detail
