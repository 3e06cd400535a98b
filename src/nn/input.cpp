#include "loom/nn/input.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/json_util.h"
#include "nn/kind_util.h"
#include "nn/options_json.h"
#include "nn/register_kinds.h"
#include "loom/ops/creation.h"

namespace loom::nn {

using detail::kMaxSize;
using detail::param_impl;
using detail::ParamData;
using detail::ParamImpl;

namespace {

// The C++ constant naming a dtype (Float32, UInt8, ...), for messages that show the fix.
const char* dtype_constant(DType d) {
  switch (d) {
    case DType::Bool: return "Bool";
    case DType::UInt8: return "UInt8";
    case DType::Int32: return "Int32";
    case DType::Int64: return "Int64";
    case DType::Float16: return "Float16";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float32";
    case DType::Float64: return "Float64";
  }
  return "?";
}

}  // namespace

namespace {

// ---------------------------------------------------------------- Input
struct InputData {
  Tensor value, fallback;
};

struct InputImpl final : KindBase<InputImpl, InputAttributes> {
  std::shared_ptr<InputData> data = std::make_shared<InputData>();
  const char* kind() const override { return "Input"; }
  Tensor compute(const std::vector<Tensor>&, Mode) override {
    if (data->value.defined()) return data->value;
    if (data->fallback.defined()) return data->fallback;
    throw ValueError("Input '" + name + "' of shape " + shape_str(shape) + " has no value: call set_value() first, " +
                     "give it a default, or pass its tensor to the compiled graph function");
  }
  void check(const Tensor& v, const char* what) const {
    if (!v.defined() || !shape_matches(shape, v.shape()))
      throw ShapeError("Input '" + name + "'." + what + ": a tensor of shape " + (v.defined() ? shape_str(v.shape()) : "undefined") +
                       " does not fit the input's shape " + shape_str(shape) + " (-1 matches any size)");
    if (v.dtype() != dtype)
      throw DTypeError("Input '" + name + "'." + what + ": a tensor of dtype " + dtype_name(v.dtype()) +
                       " does not fit the input's dtype " + dtype_name(dtype) + " (convert it with x.astype(" + dtype_constant(dtype) +
                       "), or create it with that dtype: tensor({...}, " + dtype_constant(dtype) +
                       "); C++ floating literals such as tensor({1.0, 2.0}) make float64, as NumPy)");
  }
};

InputImpl& input_impl(const Layer& l) {
  auto* p = dynamic_cast<InputImpl*>(l.impl().get());
  if (!p) throw ValueError("Input: layer '" + l.name() + "' is a " + l.kind() + ", not an Input");
  return *p;
}

// ---------------------------------------------------------------- Constant, Param
struct ConstantImpl final : LayerBase<ConstantImpl> {
  bool pure() const override { return true; }
  ConstantAttributes attrs;
  const void* attributes(const std::type_info& type) const override { return type == typeid(ConstantAttributes) ? &attrs : nullptr; }
  Tensor value;
  const char* kind() const override { return "Constant"; }
  Tensor compute(const std::vector<Tensor>&, Mode) override { return value; }
  // Its own options(), no attributes struct: the values are a JSON array (nn/attributes.h has no
  // field type for a tensor's values), read back by constant_from below. Integers exactly (int64
  // beyond 2^53 too), floats with NaN/inf spelled out
  Options options() const override {
    Options o;
    o.set_ints("shape", value.shape()).set_string("dtype", dtype_name(value.dtype()));
    nlohmann::json values = nlohmann::json::array();
    if (is_floating(value.dtype()))
      for (double x : value.to_vector<double>()) values.push_back(loom::detail::json_float(x));
    else
      for (int64_t x : value.to_vector<int64_t>()) values.push_back(x);
    json_of(o)["values"] = std::move(values);
    return o;
  }
};

}  // namespace

Input::Input(int64_t n_units, DType dtype, const std::string& name) : Input(Shape{-1, n_units}, dtype, name) {}

Input::Input(const Shape& shape, DType dtype, const std::string& name) {
  auto impl = std::make_shared<InputImpl>();
  for (int64_t d : shape)
    if (d < -1) throw ShapeError("Input: invalid dimension " + std::to_string(d) + " in " + shape_str(shape) + " (sizes >= 0, or -1 for dynamic)");
  impl->attrs = {.shape = std::vector<int64_t>(shape.begin(), shape.end()), .dtype = dtype};
  impl->shape = shape;
  impl->dtype = dtype;
  impl->name = unique_name("input", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Input::Input(std::shared_ptr<LayerImpl> impl) : Layer(std::move(impl)) { input_impl(*this); }

void Input::set_value(const Tensor& value) const {
  auto& in = input_impl(*this);
  in.check(value, "set_value");
  in.data->value = value;
}
void Input::set_default(const Tensor& value) const {
  auto& in = input_impl(*this);
  in.check(value, "set_default");
  in.data->fallback = value;
}
bool Input::has_value() const {
  auto& in = input_impl(*this);
  return in.data->value.defined() || in.data->fallback.defined();
}
Tensor Input::value() const { return input_impl(*this).compute({}, Mode::Eval); }
void Input::clear() const { input_impl(*this).data->value = Tensor(); }

Constant::Constant(const Tensor& value, const std::string& name) {
  auto impl = std::make_shared<ConstantImpl>();
  impl->value = value;
  impl->shape = value.shape();
  impl->dtype = value.dtype();
  impl->name = unique_name("constant", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Param::Param(double value, const std::string& name) {
  auto impl = std::make_shared<ParamImpl>();
  impl->data = std::make_shared<ParamData>(ParamData{value, {}});
  impl->shape = {};
  impl->name = unique_name("param", name);
  static_cast<Layer&>(*this) = Layer(impl);
}
double Param::value() const { return param_impl(*this).data->value; }
void Param::set_value(double v) const {
  auto& d = *param_impl(*this).data;
  d.value = v;
  for (auto& o : d.observers) o(v);
}
void Param::observe(std::function<void(double)> observer) const { param_impl(*this).data->observers.push_back(std::move(observer)); }

// ---------------------------------------------------------------- registration
namespace {

// A Constant's values: integer dtypes as exact integers (older files wrote them as floats,
// accepted while integral and exact, |v| <= 2^53), floating dtypes as loom::detail::json_float.
Tensor constant_from(const Options& opt) {
  const Shape shape = opt.get_ints("shape", 0, kMaxSize);
  const DType dtype = dtype_option(opt, "dtype");
  if (!opt.has("values") || !json_of(opt).at("values").is_array()) opt.fail("field 'values' is missing or not a JSON array");
  const nlohmann::json& values = json_of(opt).at("values");
  uint64_t count = 1;  // saturates past values.size(): the shape is only compared with it
  for (int64_t d : shape) {
    const uint64_t u = static_cast<uint64_t>(d);
    if (count <= values.size()) count = u != 0 && count > UINT64_MAX / u ? UINT64_MAX : count * u;
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) count = 0;
  if (count != values.size())
    opt.fail("has " + std::to_string(values.size()) + " values for shape " + shape_str(shape) + " (valid: exactly its element count)");
  if (is_floating(dtype)) {
    std::vector<double> v;
    v.reserve(values.size());
    for (const nlohmann::json& x : values) {
      const auto f = loom::detail::json_to_float(x);
      if (!f) opt.fail("holds the value " + json_brief(x) + " (valid: " + loom::detail::json_float_help() + ")");
      v.push_back(*f);
    }
    return from_vector(v, shape).astype(dtype);
  }
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  if (dtype == Bool) lo = 0, hi = 1;
  else if (dtype == UInt8) lo = 0, hi = 255;
  else if (dtype == Int32) lo = INT32_MIN, hi = INT32_MAX;
  std::vector<int64_t> v;
  v.reserve(values.size());
  for (const nlohmann::json& x : values) {
    std::optional<int64_t> i = loom::detail::json_to_int(x, lo, hi);
    if (!i && x.is_number_float()) {
      const double d = x.get<double>();
      if (d == std::floor(d) && std::fabs(d) <= 9007199254740992.0 && d >= static_cast<double>(lo) && d <= static_cast<double>(hi))
        i = static_cast<int64_t>(d);
    }
    if (!i)
      opt.fail("holds the value " + json_brief(x) + " (valid for " + dtype_name(dtype) + ": an integer in [" + std::to_string(lo) +
               ", " + std::to_string(hi) + "])");
    v.push_back(*i);
  }
  return from_vector(v, shape).astype(dtype);
}

}  // namespace

void detail::register_input_layers(AddKind add) {
  add("Input", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(0, 0);
    const auto a = read_attributes<InputAttributes>(s.options);
    return Input(a.shape, a.dtype, s.name);
  }, {write_attributes(InputAttributes{}), true});
  add("Constant", [](const LayerSpec& s) -> Layer { return Constant(constant_from(s.options), s.name); }, {Options(), true});
  // A Param keeps its own options() (detail::ParamImpl): its "value" is the current one, which
  // changes while training, not a fixed attribute.
  add("Param", [](const LayerSpec& s) -> Layer { return Param(s.options.get_float("value"), s.name); }, {Options().set_float("value", 0.0), true});
}

}  // namespace loom::nn
