// lstm_cell: argument checks, the fused kernels (src/ops/cpu/lstm.cpp) and their gradient.
#include "loom/ops/recurrent.h"

#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

namespace {

using detail::KernelSlot;

// The kernels' slots, declared beside their ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/lstm.cpp. Float32/float64, outputs allocated by the op.
// LSTM cell (contiguous operands; gates (B, 4n) pre-activations in order i, f, g, o, c (B, n)):
// out (B, 2n) <- [h2, c2] with c2 = f c + i g, h2 = o tanh(c2); ws (B, 5n) <- the activated
// gates and tanh(c2).
constinit const KernelSlot<void(const Tensor& out, const Tensor& ws, const Tensor& gates, const Tensor& c)>
    kLstmCell{"lstm.lstm_cell"};
// Its gradients for grad (B, 2n) = [d h2, d c2]: dgates (B, 4n, pre-activation) and dc (B, n;
// undefined: not wanted), from the forward's ws and c.
constinit const KernelSlot<void(const Tensor& dgates, const Tensor& dc, const Tensor& grad, const Tensor& ws,
                                const Tensor& c)>
    kLstmCellBackward{"lstm.lstm_cell_backward"};

// The definition, for the dtypes without a fused kernel.
Tensor lstm_cell_composed(const Tensor& gates, const Tensor& c, int64_t n) {
  Tensor i = sigmoid(slice(gates, -1, 0, n)), f = sigmoid(slice(gates, -1, n, 2 * n));
  Tensor g = loom::tanh(slice(gates, -1, 2 * n, 3 * n)), o = sigmoid(slice(gates, -1, 3 * n, 4 * n));
  Tensor c2 = f * c + i * g;
  return concatenate({o * loom::tanh(c2), c2}, -1);
}

}  // namespace

Tensor lstm_cell(const Tensor& gates, const Tensor& c) {
  const char* op = "lstm_cell";
  detail::check_rank(gates, 2, op, "gates", "(batch, 4 * units)");
  detail::check_rank(c, 2, op, "c", "(batch, units)");
  detail::check_same_device(gates, c, op);
  detail::check_float(gates, op, "gates");
  detail::check_same_dtype(gates, c, op, "gates", "c");
  const int64_t B = c.shape()[0], n = c.shape()[1];
  if (gates.shape()[0] != B || gates.shape()[1] != 4 * n)
    throw ShapeError(std::string(op) + ": gates must have shape " + shape_str({B, 4 * n}) + " (i, f, g, o) for c " +
                     describe(c) + ", got " + describe(gates));
  const bool fused = gates.device().type == DeviceType::CPU &&
                     (gates.dtype() == DType::Float32 || gates.dtype() == DType::Float64);
  if (!fused) return lstm_cell_composed(gates, c, n);

  Tensor gc = detail::contiguous_raw(gates.detach()), cc = detail::contiguous_raw(c.detach());
  Tensor out = detail::alloc({B, 2 * n}, gates.dtype(), gates.device(), op);
  // the activated gates and tanh(c2), kept for the backward pass as PyTorch's fused cell does
  Tensor ws = detail::alloc({B, 5 * n}, gates.dtype(), gates.device(), op);
  kLstmCell(gates.device())(out, ws, gc, cc);
  if (!detail::needs_grad({&gates, &c})) return out;
  const bool want_c = c.requires_grad();
  return detail::record(op, {gates, c}, out, [ws, cc = detail::save(cc), want_c](const Tensor& g) {
    Tensor gg = detail::contiguous_raw(g);
    const Tensor& cp = cc.get();
    Tensor dgates = detail::alloc({cp.shape()[0], 4 * cp.shape()[1]}, cp.dtype(), cp.device());
    Tensor dc = want_c ? detail::alloc(cp.shape(), cp.dtype(), cp.device()) : Tensor();
    kLstmCellBackward(cp.device())(dgates, dc, gg, ws, cp);
    return std::vector<Tensor>{dgates, dc};
  });
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> recurrent_ops() {
  return {
      {"lstm_cell", "nn", true},
  };
}

}  // namespace loom::detail
