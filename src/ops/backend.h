#pragma once
// The kernel table of one device. Ops (src/ops/*.cpp) check arguments, infer shapes and
// dtypes, allocate outputs and record gradients; kernels only compute. Each backend registers
// its table explicitly from its init function (see register_cpu_backend).
#include <cstdint>
#include <vector>

#include "loom/core/tensor.h"

namespace loom::detail {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Max, Min, Mod, FloorDiv, Eq, Ne, Lt, Le, Gt, Ge, And, Or, Xor };
enum class UnaryOp : uint8_t {
  Neg, Abs, Sign, Exp, Log, Log1p, Expm1, Sqrt, Rsqrt, Square, Sin, Cos, Tanh, Sigmoid, Erf, Relu, Floor, Ceil, Round, Not
};
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, All, Any, ArgMax, ArgMin };
enum class RandomKind : uint8_t { Uniform, Normal, Bernoulli, Integer };

struct Backend {
  // dst and src have the same shape (src may be a broadcast view); converts dtypes.
  void (*copy)(const Tensor& dst, const Tensor& src);
  void (*fill)(const Tensor& dst, Scalar value);
  // a and b are views broadcast to out's shape, both of the compute dtype; comparisons and
  // logical ops write bool.
  void (*binary)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
  void (*unary)(UnaryOp op, const Tensor& out, const Tensor& x);
  void (*where)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
  // out has x's rank with size 1 on the reduced axes; ArgMax/ArgMin reduce one axis into int64.
  void (*reduce)(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& reduced);
  void (*cumsum)(const Tensor& out, const Tensor& x, int64_t axis);
  // out[b] = a[b] @ b[b] for 3-d operands of equal batch size.
  void (*matmul)(const Tensor& out, const Tensor& a, const Tensor& b);
  // out = x.take(index, axis) with out.shape = x.shape[:axis] + index.shape + x.shape[axis+1:].
  void (*take)(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index);
  // dst[..., index[i], ...] += src[..., i, ...] along axis (index has any shape; src matches take's output).
  void (*index_add)(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src);
  // out[..i..] = x[.. index[..i..] ..] along axis (index and out same shape).
  void (*take_along)(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index);
  void (*scatter_add_along)(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src);
  // dst_flat[index[i]] = src[i] in order (a later duplicate wins); 1-d contiguous operands.
  void (*put)(const Tensor& dst_flat, const Tensor& index, const Tensor& src);
  // Positions of non-zero elements of x: an int64 tensor of shape (count, ndim).
  Tensor (*nonzero)(const Tensor& x);
  void (*random)(RandomKind kind, const Tensor& out, uint64_t key, double a, double b);
};

const Backend& backend(Device device);
void register_backend(DeviceType type, const Backend* table);
void register_cpu_backend();

}  // namespace loom::detail
