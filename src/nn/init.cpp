#include "loom/nn/init.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/json_util.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"

namespace loom::nn {

std::string Init::name() const {
  switch (kind) {
    case Kind::GlorotUniform: return "glorot_uniform";
    case Kind::GlorotNormal: return "glorot_normal";
    case Kind::HeUniform: return "he_uniform";
    case Kind::HeNormal: return "he_normal";
    case Kind::Orthogonal: return "orthogonal";
    case Kind::Zeros: return "zeros";
    case Kind::Ones: return "ones";
    case Kind::Constant: return "constant";
    case Kind::Normal: return "normal";
    case Kind::Uniform: return "uniform";
  }
  return "?";
}

std::string Init::to_json() const {
  return "{\"kind\":\"" + name() + "\",\"a\":" + detail::json_float_text(a) + ",\"b\":" + detail::json_float_text(b) + "}";
}

Init Init::from_name(const std::string& kind, double a, double b) {
  std::string known;
  for (int k = 0; k <= static_cast<int>(Kind::Uniform); ++k) {
    Init i{static_cast<Kind>(k), a, b};
    if (i.name() == kind) return i;
    known += (known.empty() ? "" : ", ") + i.name();
  }
  throw ValueError("Init::from_name: unknown initializer '" + kind + "' (known: " + known + ")");
}

namespace {

void fans(const Shape& s, double& fan_in, double& fan_out) {
  if (s.empty()) { fan_in = fan_out = 1; return; }
  if (s.size() == 1) { fan_in = fan_out = static_cast<double>(s[0]); return; }
  double receptive = 1;
  for (size_t i = 2; i < s.size(); ++i) receptive *= static_cast<double>(s[i]);
  if (s.size() == 2) {  // (in, out) matrices as Linear stores them
    fan_in = static_cast<double>(s[0]);
    fan_out = static_cast<double>(s[1]);
  } else {  // (out, in, k...) kernels
    fan_in = static_cast<double>(s[1]) * receptive;
    fan_out = static_cast<double>(s[0]) * receptive;
  }
}

// Rows (or columns, whichever are fewer) orthonormal: Gram-Schmidt on a Gaussian matrix.
Tensor orthogonal(const Shape& s, double gain, Generator* gen) {
  if (s.size() < 2) throw ShapeError("initialize(orthogonal): needs a shape of rank 2 or more, got " + shape_str(s));
  const int64_t rows = s[0], cols = shape_numel(s) / rows;
  const bool tall = rows >= cols;
  const int64_t n = tall ? cols : rows, m = tall ? rows : cols;  // n vectors of length m
  std::vector<double> v = normal({n, m}, 0, 1, Float64, default_device(), gen).to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    double* vi = &v[i * m];
    for (int64_t j = 0; j < i; ++j) {
      const double* vj = &v[j * m];
      double d = 0;
      for (int64_t k = 0; k < m; ++k) d += vi[k] * vj[k];
      for (int64_t k = 0; k < m; ++k) vi[k] -= d * vj[k];
    }
    double norm = 0;
    for (int64_t k = 0; k < m; ++k) norm += vi[k] * vi[k];
    norm = std::sqrt(norm);
    for (int64_t k = 0; k < m; ++k) vi[k] = gain * vi[k] / norm;
  }
  Tensor q = from_vector(v, {n, m});
  if (tall) q = q.transpose().contiguous();  // (rows, cols) with orthonormal columns
  return q.reshape(s);
}

}  // namespace

namespace {
thread_local ParamBudget* current_budget = nullptr;
}  // namespace

ParamBudget::ParamBudget(uint64_t max_bytes) : previous_(current_budget), left_(max_bytes), max_(max_bytes) { current_budget = this; }
ParamBudget::~ParamBudget() { current_budget = previous_; }

void ParamBudget::take(uint64_t bytes, const std::string& what) {
  if (bytes > left_)
    throw ValueError("initialize: " + what + " needs " + (bytes == UINT64_MAX ? std::string("more than 2^64") : std::to_string(bytes)) +
                     " bytes, more than the " + std::to_string(left_) + " bytes left of the " + std::to_string(max_) +
                     " that the file being loaded holds (the architecture asks for tensors the file cannot contain)");
  left_ -= bytes;
}

Tensor initialize(const Init& init, const Shape& shape, DType dtype, Generator* gen) {
  if (current_budget) {  // loading: size checked before allocating, values come from the file
    uint64_t bytes = itemsize(dtype);
    for (int64_t d : shape) {
      if (d < 0) throw ShapeError("initialize: a parameter of shape " + shape_str(shape) + " has a negative extent");
      if (bytes != UINT64_MAX) bytes = d != 0 && bytes > UINT64_MAX / static_cast<uint64_t>(d) ? UINT64_MAX : bytes * static_cast<uint64_t>(d);
    }
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) bytes = 0;
    current_budget->take(bytes, std::string("a parameter of shape ") + shape_str(shape) + " " + dtype_name(dtype));
    return empty(shape, dtype);
  }
  if (init.kind == Init::Kind::Zeros) return zeros(shape, dtype);
  if (init.kind == Init::Kind::Ones) return ones(shape, dtype);
  double fin, fout;
  fans(shape, fin, fout);
  Tensor t;
  switch (init.kind) {
    case Init::Kind::GlorotUniform: {
      const double lim = std::sqrt(6.0 / (fin + fout));
      t = uniform(shape, -lim, lim, Float64, default_device(), gen);
      break;
    }
    case Init::Kind::GlorotNormal: t = normal(shape, 0, std::sqrt(2.0 / (fin + fout)), Float64, default_device(), gen); break;
    case Init::Kind::HeUniform: {
      const double lim = std::sqrt(6.0 / fin);
      t = uniform(shape, -lim, lim, Float64, default_device(), gen);
      break;
    }
    case Init::Kind::HeNormal: t = normal(shape, 0, std::sqrt(2.0 / fin), Float64, default_device(), gen); break;
    case Init::Kind::Orthogonal: t = orthogonal(shape, init.a == 0 ? 1.0 : init.a, gen); break;
    case Init::Kind::Zeros: t = zeros(shape, Float64); break;
    case Init::Kind::Ones: t = ones(shape, Float64); break;
    case Init::Kind::Constant: t = full(shape, init.a, Float64); break;
    case Init::Kind::Normal: t = normal(shape, init.a, init.b, Float64, default_device(), gen); break;
    case Init::Kind::Uniform: t = uniform(shape, init.a, init.b, Float64, default_device(), gen); break;
  }
  return t.astype(dtype).contiguous();
}

}  // namespace loom::nn
