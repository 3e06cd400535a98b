#pragma once
// Weight-only int8 quantization (docs/nn_ops.md, "int8 weights"): a float matrix stored as
// symmetric int8 values with a float32 scale per output and group of inputs, multiplied by float
// activations without ever making a float copy of it (the kernels widen the int8 values in
// registers and multiply them by the activations rounded to int16: AVX-512, AVX2 and baseline
// builds, ops/cpu/simd/quantized.inc). For inference: a decoder step reads the weights once, so
// int8 reads a quarter of float32's bytes.
#include <cstdint>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// A (K, N) matrix (Loom's Linear layout: inputs by outputs) in int8: values (N, K) — one row per
// output, so a product reads each output's weights contiguously — and scales (N, G), G =
// ceil(K / group), with w[k, j] ~ scales[j, k / group] * values[j, k]. Loom has no int8 dtype:
// `values` is a UInt8 tensor holding the two's-complement bytes of the int8 values, -127..127.
struct LOOM_API QuantizedMatrix {
  Tensor values;
  Tensor scales;
  int64_t group = 0;  // inputs per scale (K for one scale per output)

  int64_t in_features() const { return values.dim(1); }   // K
  int64_t out_features() const { return values.dim(0); }  // N
};

// Symmetric int8 quantization of a float32 or float64 (K, N) matrix: each output's inputs in
// groups of `group` (0: all K, one scale per output), scale = max |w| / 127 over the group,
// values = round(w / scale) (ties away from zero; a group of zeros gets scale 0). ValueError for
// a matrix that is not 2-d floating, or a group outside [0, K].
LOOM_API QuantizedMatrix quantize_int8(const Tensor& w, int64_t group = 0);

// The float32 (K, N) matrix that `q` stands for.
LOOM_API Tensor dequantize(const QuantizedMatrix& q);

// x (..., K) float32 times the matrix `w` stands for: (..., N) float32. Each row of x is first
// rounded to int16, round(x * 32767 / amax) with amax its largest |x| (ties to even), so an
// element moves by at most amax / 65534; each output is then amax / 32767 times the sum over
// groups of scale * (the integer dot of the rounded row and the int8 values, exact), in float32.
// A row holding an infinity or NaN gives NaN outputs (that row only). With `bias` (N) float32,
// each output adds its bias in the same pass (a Linear's bias: no second op over the result).
// Not differentiable: ValueError when x or bias requires grad in grad mode; also for a dtype
// other than float32 or a K that does not match; ShapeError for a bias that is not (N) float32.
LOOM_API Tensor matmul_int8(const Tensor& x, const QuantizedMatrix& w, const Tensor& bias = Tensor());

}  // namespace loom
