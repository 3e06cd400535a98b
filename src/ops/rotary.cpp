// Rotary position embedding as a composite of differentiable ops: the cos and sin tables are
// constants (no gradient), the rotation two slices, a concatenation and two products.
#include "loom/ops/rotary.h"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "ops/registry_parts.h"

namespace loom {

namespace {

void check_options(const RotaryOptions& o, const char* op) {
  const auto bad = [op](const std::string& what) { throw ValueError(std::string(op) + ": " + what); };
  if (!(o.base > 1) || !std::isfinite(o.base)) bad("base " + std::to_string(o.base) + " (valid: a finite value above 1)");
  if (!(o.linear_factor > 0) || !std::isfinite(o.linear_factor)) bad("linear_factor " + std::to_string(o.linear_factor) + " (valid: > 0)");
  if (o.llama3_factor != 0) {
    if (!(o.llama3_factor >= 1) || !std::isfinite(o.llama3_factor)) bad("llama3_factor " + std::to_string(o.llama3_factor) + " (valid: 0 for none, or >= 1)");
    if (!(o.low_freq_factor > 0) || !(o.high_freq_factor > o.low_freq_factor))
      bad("low_freq_factor " + std::to_string(o.low_freq_factor) + " and high_freq_factor " + std::to_string(o.high_freq_factor) +
          " (valid: 0 < low < high)");
    if (o.original_max_positions < 1) bad("original_max_positions " + std::to_string(o.original_max_positions) + " (valid: >= 1)");
  }
}

// inv_freq as float values computed the way transformers computes them in `T` (float for float32).
template <class T>
std::vector<T> frequencies(int64_t d, const RotaryOptions& o) {
  std::vector<T> f(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) {
    const T exponent = static_cast<T>(2 * i) / static_cast<T>(d);
    f[i] = static_cast<T>(1) / static_cast<T>(std::pow(static_cast<T>(o.base), exponent));
  }
  if (o.llama3_factor != 0) {
    // wavelengths longer than the original context / low_freq_factor are slowed by the factor,
    // shorter than original / high_freq_factor kept, and those between blended linearly in
    // original / wavelength
    const double low_wavelength = static_cast<double>(o.original_max_positions) / o.low_freq_factor;
    const double high_wavelength = static_cast<double>(o.original_max_positions) / o.high_freq_factor;
    for (T& v : f) {
      const double wavelength = 2 * std::numbers::pi / static_cast<double>(v);
      if (wavelength > low_wavelength) {
        v = static_cast<T>(v / o.llama3_factor);
      } else if (wavelength >= high_wavelength) {
        const double smooth = (static_cast<double>(o.original_max_positions) / wavelength - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
        v = static_cast<T>((1 - smooth) * static_cast<double>(v) / o.llama3_factor + smooth * static_cast<double>(v));
      }
    }
  }
  return f;
}

// cos and sin of the angles (T, D): the D/2 angles of each position twice (the halves' pairs)
template <class T>
std::pair<Tensor, Tensor> tables(int64_t t, int64_t d, int64_t offset, const RotaryOptions& o, DType dtype) {
  const std::vector<T> f = frequencies<T>(d, o);
  std::vector<double> c(static_cast<size_t>(t * d)), s(c.size());
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < d / 2; ++i) {
      const T position = static_cast<T>(static_cast<double>(p + offset) / o.linear_factor);
      const T angle = position * f[i];
      const double cv = std::cos(static_cast<double>(angle)), sv = std::sin(static_cast<double>(angle));
      c[p * d + i] = c[p * d + i + d / 2] = cv;
      s[p * d + i] = s[p * d + i + d / 2] = sv;
    }
  return {from_vector<double>(c, {t, d}).astype(dtype), from_vector<double>(s, {t, d}).astype(dtype)};
}

}  // namespace

Tensor rotary_frequencies(int64_t head_size, const RotaryOptions& o) {
  check_options(o, "rotary_frequencies");
  if (head_size < 2 || head_size % 2)
    throw ValueError("rotary_frequencies: head size " + std::to_string(head_size) + " (valid: an even size of at least 2)");
  const std::vector<double> f = frequencies<double>(head_size, o);
  return from_vector<double>(f, {head_size / 2});
}

Tensor rotary_embedding(const Tensor& x, int64_t offset, const RotaryOptions& o) {
  const char* op = "rotary_embedding";
  if (!x.defined()) throw ValueError(std::string(op) + ": the input is undefined");
  check_options(o, op);
  if (!is_floating(x.dtype()))
    throw ValueError(std::string(op) + ": x has dtype " + dtype_name(x.dtype()) + " (valid: float32 or float64)");
  if (x.ndim() < 2) throw ShapeError(std::string(op) + ": x has shape " + shape_str(x.shape()) + " (valid: (..., positions, head size))");
  const int64_t t = x.shape()[x.ndim() - 2], d = x.shape().back();
  if (d < 2 || d % 2) throw ShapeError(std::string(op) + ": head size " + std::to_string(d) + " of x " + shape_str(x.shape()) + " (valid: even, at least 2)");
  if (offset < 0) throw ValueError(std::string(op) + ": offset " + std::to_string(offset) + " (valid: >= 0)");
  Tensor c, s;
  {
    NoGrad constants;
    std::tie(c, s) = x.dtype() == Float32 ? tables<float>(t, d, offset, o, Float32) : tables<double>(t, d, offset, o, x.dtype());
  }
  const Tensor rotated = concatenate({negative(slice(x, -1, d / 2, d)), slice(x, -1, 0, d / 2)}, -1);
  return x * c + rotated * s;
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> rotary_ops() {
  return {
      {"rotary_embedding", "nn", true},
  };
}

}  // namespace loom::detail
