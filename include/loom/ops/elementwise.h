#pragma once
// Elementwise ops with NumPy broadcasting and dtype promotion (docs/dtypes.md).
#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// arithmetic
LOOM_API Tensor add(const Tensor& a, const Tensor& b);
LOOM_API Tensor subtract(const Tensor& a, const Tensor& b);
LOOM_API Tensor multiply(const Tensor& a, const Tensor& b);
LOOM_API Tensor divide(const Tensor& a, const Tensor& b);  // true division: integers give float64 (NumPy)
LOOM_API Tensor power(const Tensor& a, const Tensor& b);
LOOM_API Tensor maximum(const Tensor& a, const Tensor& b);
LOOM_API Tensor minimum(const Tensor& a, const Tensor& b);
LOOM_API Tensor mod(const Tensor& a, const Tensor& b);           // sign of the divisor, like numpy.mod
LOOM_API Tensor floor_divide(const Tensor& a, const Tensor& b);  // floor(a / b)

// comparisons and logic: bool results
LOOM_API Tensor equal(const Tensor& a, const Tensor& b);
LOOM_API Tensor not_equal(const Tensor& a, const Tensor& b);
LOOM_API Tensor less(const Tensor& a, const Tensor& b);
LOOM_API Tensor less_equal(const Tensor& a, const Tensor& b);
LOOM_API Tensor greater(const Tensor& a, const Tensor& b);
LOOM_API Tensor greater_equal(const Tensor& a, const Tensor& b);
LOOM_API Tensor logical_and(const Tensor& a, const Tensor& b);
LOOM_API Tensor logical_or(const Tensor& a, const Tensor& b);
LOOM_API Tensor logical_xor(const Tensor& a, const Tensor& b);
LOOM_API Tensor logical_not(const Tensor& a);

LOOM_API Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
LOOM_API Tensor clip(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi);

// unary math
LOOM_API Tensor abs(const Tensor& x);
LOOM_API Tensor sign(const Tensor& x);
LOOM_API Tensor negative(const Tensor& x);
LOOM_API Tensor exp(const Tensor& x);
LOOM_API Tensor log(const Tensor& x);
LOOM_API Tensor log1p(const Tensor& x);
LOOM_API Tensor expm1(const Tensor& x);
LOOM_API Tensor sqrt(const Tensor& x);
LOOM_API Tensor rsqrt(const Tensor& x);
LOOM_API Tensor square(const Tensor& x);
LOOM_API Tensor sin(const Tensor& x);
LOOM_API Tensor cos(const Tensor& x);
LOOM_API Tensor tanh(const Tensor& x);
LOOM_API Tensor sigmoid(const Tensor& x);
LOOM_API Tensor erf(const Tensor& x);
LOOM_API Tensor floor(const Tensor& x);
LOOM_API Tensor ceil(const Tensor& x);
LOOM_API Tensor round(const Tensor& x);  // half to even, like numpy.round

// activations
LOOM_API Tensor relu(const Tensor& x);
LOOM_API Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
LOOM_API Tensor elu(const Tensor& x, double alpha = 1.0);
LOOM_API Tensor gelu(const Tensor& x, bool tanh_approximation = false);
// x * sigmoid(x) (torch.nn.functional.silu; Swish with beta 1): the gate of Llama's SwiGLU.
LOOM_API Tensor silu(const Tensor& x);
LOOM_API Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

// dtype conversion (differentiable between floating types)
LOOM_API Tensor astype(const Tensor& x, DType dtype);

// operators; a C++ number is a "weak" scalar (Scalar::result_dtype_with)
LOOM_API Tensor operator+(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator-(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator*(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator/(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator%(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator-(const Tensor& a);
LOOM_API Tensor operator==(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator!=(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator<(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator<=(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator>(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator>=(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator&&(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator||(const Tensor& a, const Tensor& b);
LOOM_API Tensor operator!(const Tensor& a);

LOOM_API Tensor operator+(const Tensor& a, Scalar b);
LOOM_API Tensor operator-(const Tensor& a, Scalar b);
LOOM_API Tensor operator*(const Tensor& a, Scalar b);
LOOM_API Tensor operator/(const Tensor& a, Scalar b);
LOOM_API Tensor operator+(Scalar a, const Tensor& b);
LOOM_API Tensor operator-(Scalar a, const Tensor& b);
LOOM_API Tensor operator*(Scalar a, const Tensor& b);
LOOM_API Tensor operator/(Scalar a, const Tensor& b);
LOOM_API Tensor operator==(const Tensor& a, Scalar b);
LOOM_API Tensor operator!=(const Tensor& a, Scalar b);
LOOM_API Tensor operator<(const Tensor& a, Scalar b);
LOOM_API Tensor operator<=(const Tensor& a, Scalar b);
LOOM_API Tensor operator>(const Tensor& a, Scalar b);
LOOM_API Tensor operator>=(const Tensor& a, Scalar b);
LOOM_API Tensor power(const Tensor& a, Scalar b);
LOOM_API Tensor maximum(const Tensor& a, Scalar b);
LOOM_API Tensor minimum(const Tensor& a, Scalar b);
LOOM_API Tensor where(const Tensor& condition, const Tensor& a, Scalar b);
LOOM_API Tensor where(const Tensor& condition, Scalar a, const Tensor& b);

// in place (not recorded by autograd; refuse tensors that require grad while recording)
LOOM_API Tensor& operator+=(Tensor& a, const Tensor& b);
LOOM_API Tensor& operator-=(Tensor& a, const Tensor& b);
LOOM_API Tensor& operator*=(Tensor& a, const Tensor& b);
LOOM_API Tensor& operator/=(Tensor& a, const Tensor& b);
LOOM_API Tensor& operator+=(Tensor& a, Scalar b);
LOOM_API Tensor& operator-=(Tensor& a, Scalar b);
LOOM_API Tensor& operator*=(Tensor& a, Scalar b);
LOOM_API Tensor& operator/=(Tensor& a, Scalar b);

// comparisons that do not build tensors
LOOM_API bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
LOOM_API bool array_equal(const Tensor& a, const Tensor& b);  // same shape and values

}  // namespace loom
