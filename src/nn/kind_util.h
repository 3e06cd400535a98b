#pragma once
// Helpers that several layer kinds' sources share (src/nn/*.cpp): input checks, sizes read from
// a file, per-axis integer options, and Param's data (Dropout observes it).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/nn/input.h"
#include "loom/nn/layer.h"
#include "loom/nn/options.h"
#include "loom/nn/registry.h"
#include "loom/ops/conv.h"
#include "loom/ops/creation.h"

namespace loom::nn::detail {

constexpr int64_t kMaxSize = int64_t{1} << 40;  // sizes and units read from a file

inline std::string fmt_double(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Output shape of a layer that maps the last axis of `in` to n units.
inline Shape with_units(const Shape& in, int64_t n) {
  Shape s = in.empty() ? Shape{1} : in;
  s.back() = n;
  return s;
}

// "Kind 'name'": how a kind's shape rule names its layer in errors.
inline std::string who(const LayerImpl& l) { return std::string(l.kind()) + " '" + l.name + "'"; }

// The layer's shape by its kind's rule for these inputs; a ShapeError names the inputs too.
inline Shape shape_by_rule(const LayerImpl& l, const std::vector<Layer>& inputs) {
  std::vector<Shape> shapes;
  for (const Layer& i : inputs) shapes.push_back(i.shape());
  try {
    return l.output_shapes(shapes).at(0);
  } catch (const ShapeError& e) {
    std::string names;
    for (const Layer& i : inputs) names += (names.empty() ? "'" : ", '") + i.name() + "' " + shape_str(i.shape());
    throw ShapeError(std::string(e.what()) + " (inputs: " + names + ")");
  }
}

inline void require_input(const Layer& l, const char* kind) {
  if (!l.defined()) throw ValueError(std::string(kind) + ": an input layer is undefined");
}

inline std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Sizes above this are refused: no window is that large, and the output-size arithmetic
// (nn/conv.cpp, nn/pooling.cpp) then cannot overflow.
constexpr int64_t kMaxExtent = int64_t{1} << 31;

// One value per spatial axis from an IntList (a single value repeats; empty gives `dflt`, and
// an empty `dflt` means the value is required), each in [min_value, kMaxExtent].
inline std::vector<int64_t> per_axis(const IntList& l, size_t n, const std::vector<int64_t>& dflt, const char* what, const char* kind,
                                     int64_t min_value) {
  const auto& v = l.values();
  std::vector<int64_t> r;
  if (v.empty()) r = dflt;
  else if (v.size() == 1) r.assign(n, v[0]);
  else if (v.size() == n) r = v;
  if (r.size() != n)
    throw ValueError(std::string(kind) + ": " + what + " " + ints(v) + " must give 1 or " + std::to_string(n) + " values");
  for (int64_t x : r)
    if (x < min_value || x > kMaxExtent)
      throw ValueError(std::string(kind) + ": " + what + " " + ints(v) + " is invalid (valid: values in [" + std::to_string(min_value) +
                       ", 2^31])");
  return r;
}

inline void require_rank(const Layer& in, size_t rank, const char* kind, const char* layout) {
  if (!in.defined()) throw ValueError(std::string(kind) + ": the input layer is undefined");
  if (in.shape().size() != rank)
    throw ShapeError(std::string(kind) + ": input '" + in.name() + "' has shape " + shape_str(in.shape()) + " (valid: " + layout + ")");
  if (in.shape()[1] <= 0)
    throw ShapeError(std::string(kind) + ": input '" + in.name() + "' must have a known channel count on axis 1, got " + shape_str(in.shape()));
}

inline IntList ints_option(const Options& o, const char* key, int64_t lo) { return IntList(o.get_ints(key, lo, kMaxSize)); }

// ---------------------------------------------------------------- Param (nn/input.cpp; Dropout reads it)
struct ParamData {
  double value;
  std::vector<std::function<void(double)>> observers;
};

struct ParamImpl final : LayerBase<ParamImpl> {
  std::shared_ptr<ParamData> data;
  ParamAttributes attrs;
  const void* attributes(const std::type_info& type) const override { return type == typeid(ParamAttributes) ? &attrs : nullptr; }
  const char* kind() const override { return "Param"; }
  Tensor compute(const std::vector<Tensor>&, Mode) override { return scalar_tensor(data->value, DType::Float32); }
  Options options() const override { return Options().set_float("value", data->value); }
};

inline ParamImpl& param_impl(const Layer& l) { return dynamic_cast<ParamImpl&>(*l.impl()); }

}  // namespace loom::nn::detail
