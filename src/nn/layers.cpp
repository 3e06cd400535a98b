#include "loom/nn/layers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "core/json_util.h"
#include "nn/init_options.h"
#include "nn/options_json.h"
#include "nn/register_kinds.h"
#include "nn/sparse_layers_internal.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"
#include "loom/ops/random.h"
#include "loom/ops/reduction.h"

namespace loom::nn {

namespace {

std::string fmt_double(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Output shape of a layer that maps the last axis of `in` to n units.
Shape with_units(const Shape& in, int64_t n) {
  Shape s = in.empty() ? Shape{1} : in;
  s.back() = n;
  return s;
}

void require_input(const Layer& l, const char* kind) {
  if (!l.defined()) throw ValueError(std::string(kind) + ": an input layer is undefined");
}

// ---------------------------------------------------------------- Input
struct InputData {
  Tensor value, fallback;
};

struct InputImpl final : LayerBase<InputImpl> {
  std::shared_ptr<InputData> data = std::make_shared<InputData>();
  const char* kind() const override { return "Input"; }
  Tensor compute(const std::vector<Tensor>&, Mode) override {
    if (data->value.defined()) return data->value;
    if (data->fallback.defined()) return data->fallback;
    throw ValueError("Input '" + name + "' of shape " + shape_str(shape) + " has no value: call set_value() first, " +
                     "give it a default, or pass its tensor to the compiled graph function");
  }
  Options options() const override { return Options().set_ints("shape", shape).set_string("dtype", dtype_name(dtype)); }
  void check(const Tensor& v, const char* what) const {
    if (!v.defined() || !shape_matches(shape, v.shape()))
      throw ShapeError("Input '" + name + "'." + what + ": a tensor of shape " + (v.defined() ? shape_str(v.shape()) : "undefined") +
                       " does not fit the input's shape " + shape_str(shape) + " (-1 matches any size)");
    if (v.dtype() != dtype)
      throw DTypeError("Input '" + name + "'." + what + ": a tensor of dtype " + dtype_name(v.dtype()) +
                       " does not fit the input's dtype " + dtype_name(dtype));
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
  Tensor value;
  const char* kind() const override { return "Constant"; }
  Tensor compute(const std::vector<Tensor>&, Mode) override { return value; }
  // integers exactly (int64 beyond 2^53 too), floats with NaN/inf spelled out
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

struct ParamData {
  double value;
  std::vector<std::function<void(double)>> observers;
};

struct ParamImpl final : LayerBase<ParamImpl> {
  std::shared_ptr<ParamData> data;
  const char* kind() const override { return "Param"; }
  Tensor compute(const std::vector<Tensor>&, Mode) override { return scalar_tensor(data->value, DType::Float32); }
  Options options() const override { return Options().set_float("value", data->value); }
};

ParamImpl& param_impl(const Layer& l) { return dynamic_cast<ParamImpl&>(*l.impl()); }

// ---------------------------------------------------------------- Linear
struct LinearImpl final : LayerBase<LinearImpl> {
  bool pure() const override { return true; }
  int64_t n_units = 0;
  bool bias = true, transpose_weights = false;
  Init weight_init, bias_init;
  const char* kind() const override { return "Linear"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const Tensor& w = state->param("weights");
    const Tensor wt = transpose_weights ? w.transpose() : w;
    if (bias && in[0].defined()) return linear(in[0], wt, state->param("bias"));  // the bias added inside the product
    Tensor y = detail::input_matmul(inputs[0], in[0], wt);  // a SparseInput too
    return bias ? y + state->param("bias") : y;
  }
  Options options() const override {
    return Options()
        .set_int("n_units", n_units)
        .set_bool("bias", bias)
        .set_bool("transpose_weights", transpose_weights)
        .set_object("weight_init", detail::init_options(weight_init))
        .set_object("bias_init", detail::init_options(bias_init));
  }
};

// ---------------------------------------------------------------- Activation
struct ActivationImpl final : LayerBase<ActivationImpl> {
  bool pure() const override { return true; }
  ActivationFn fn;
  const char* kind() const override { return "Activation"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return fn(in[0]); }
  Options options() const override { return Options().set_string("fn", fn.name); }
};

// ---------------------------------------------------------------- Dropout
struct DropoutImpl final : LayerBase<DropoutImpl> {
  double probability = 0.5;
  std::shared_ptr<ParamData> param;  // when the probability is a Param
  uint64_t seed = 0;
  const char* kind() const override { return "Dropout"; }
  double p() const { return param ? param->value : probability; }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override {
    if (mode != Mode::Train) return in[0];
    // the stream position lives in the state (buffer "rng": seed, draws) so that checkpoints
    // carry it and a resumed run draws the same masks
    Tensor& rng = state->buffer("rng");
    int64_t* s = rng.data<int64_t>();
    Generator g;
    g.set_state(static_cast<uint64_t>(s[0]), static_cast<uint64_t>(s[1]));
    Tensor y = dropout(in[0], p(), true, &g);
    s[1] = static_cast<int64_t>(g.counter());
    return y;
  }
  Options options() const override { return Options().set_float("probability", p()).set_uint("seed", seed); }
};

// ---------------------------------------------------------------- merges

struct MergeImpl final : LayerBase<MergeImpl> {
  bool pure() const override { return true; }
  MergeMode op = MergeMode::Sum;
  int64_t axis = -1;
  const char* kind() const override {
    switch (op) {
      case MergeMode::Sum: return "Add";
      case MergeMode::Subtract: return "Subtract";
      case MergeMode::Multiply: return "Multiply";
      case MergeMode::Mean: return "Mean";
      case MergeMode::Concat: return "Concat";
    }
    return "?";
  }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    if (op == MergeMode::Concat) return concatenate(in, axis);
    Tensor acc = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      if (op == MergeMode::Subtract) acc = acc - in[i];
      else if (op == MergeMode::Multiply) acc = acc * in[i];
      else acc = acc + in[i];
    }
    if (op == MergeMode::Mean) acc = acc / static_cast<double>(in.size());
    return acc;
  }
  Options options() const override { return op == MergeMode::Concat ? Options().set_int("axis", axis) : Options(); }
};

Shape merge_shape(const std::vector<Layer>& inputs, MergeMode op, int64_t axis, const char* kind) {
  if (inputs.empty()) throw ValueError(std::string(kind) + ": needs at least one input layer");
  for (const Layer& l : inputs) require_input(l, kind);
  Shape s = inputs[0].shape();
  if (op == MergeMode::Concat) {
    const int64_t a = normalize_axis(axis, static_cast<int64_t>(s.size()), kind);
    for (size_t i = 1; i < inputs.size(); ++i) {
      const Shape& t = inputs[i].shape();
      bool ok = t.size() == s.size();
      for (size_t d = 0; ok && d < s.size(); ++d)
        if (static_cast<int64_t>(d) != a && t[d] != s[d] && t[d] >= 0 && s[d] >= 0) ok = false;
      if (!ok)
        throw ShapeError(std::string(kind) + ": layer '" + inputs[i].name() + "' has shape " + shape_str(t) + " but '" +
                         inputs[0].name() + "' has " + shape_str(s) + " (all axes but " + std::to_string(axis) + " must match)");
      s[a] = (s[a] < 0 || t[a] < 0) ? -1 : s[a] + t[a];
    }
    return s;
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    const Shape& t = inputs[i].shape();
    // broadcast with -1 (dynamic) treated as matching anything
    const size_t n = std::max(s.size(), t.size());
    Shape r(n);
    for (size_t d = 0; d < n; ++d) {
      const int64_t x = d < n - s.size() ? 1 : s[d - (n - s.size())];
      const int64_t y = d < n - t.size() ? 1 : t[d - (n - t.size())];
      if (x != y && x != 1 && y != 1 && x >= 0 && y >= 0)
        throw ShapeError(std::string(kind) + ": layer '" + inputs[i].name() + "' has shape " + shape_str(t) +
                         " which does not broadcast with " + shape_str(s) + " (from '" + inputs[0].name() + "')");
      r[d] = (x < 0 || y < 0) ? -1 : std::max(x, y);
    }
    s = r;
  }
  return s;
}

template <typename Handle>
std::shared_ptr<MergeImpl> make_merge(const std::vector<Layer>& inputs, MergeMode op, int64_t axis, const std::string& name,
                                      const char* kind) {
  auto impl = std::make_shared<MergeImpl>();
  impl->op = op;
  impl->axis = axis;
  impl->shape = merge_shape(inputs, op, axis, kind);
  impl->dtype = inputs[0].dtype();
  for (const Layer& l : inputs) impl->dtype = promote_types(impl->dtype, l.dtype());
  impl->inputs = inputs;
  impl->name = unique_name(std::string(kind) == "Add" ? "add" : std::string(kind), name);
  return impl;
}

// ---------------------------------------------------------------- Lambda
using json = nlohmann::json;

struct LambdaImpl final : LayerBase<LambdaImpl> {
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  LambdaFn stateful;         // the form with declared tensors
  std::string kind_name = "Lambda";
  const char* kind() const override { return kind_name.c_str(); }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return stateful ? stateful(in, *state) : fn(in); }
  Options options() const override {
    if (!stateful || kind_name == "Lambda")
      throw ValueError("layer '" + name + "' is a Lambda (an arbitrary C++ function), which cannot be saved: write it as a layer kind " +
                       "(docs/layers.md, \"Writing a layer\"), or declare its tensors and give it a kind registered with " +
                       "nn::register_lambda_kind");
    Options o;
    json& j = json_of(o);
    j["shape"] = shape;
    j["dtype"] = dtype_name(dtype);
    for (bool buffers : {false, true}) {
      json list = json::array();
      for (const auto& [k, t] : buffers ? state->buffers() : state->params())
        list.push_back({{"name", k}, {"shape", t.shape()}, {"dtype", dtype_name(t.dtype())}});
      j[buffers ? "buffers" : "params"] = list;
    }
    return o;
  }
};

}  // namespace

// ---------------------------------------------------------------- handles
Input::Input(int64_t n_units, DType dtype, const std::string& name) : Input(Shape{-1, n_units}, dtype, name) {}

Input::Input(const Shape& shape, DType dtype, const std::string& name) {
  auto impl = std::make_shared<InputImpl>();
  for (int64_t d : shape)
    if (d < -1) throw ShapeError("Input: invalid dimension " + std::to_string(d) + " in " + shape_str(shape) + " (sizes >= 0, or -1 for dynamic)");
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

Linear::Linear(const Layer& input, int64_t n_units, LinearOptions o, const std::string& name) {
  require_input(input, "Linear");
  if (n_units <= 0) throw ValueError("Linear: n_units must be positive, got " + std::to_string(n_units));
  const int64_t in = input.n_units();
  if (in <= 0)
    throw ShapeError("Linear: input '" + input.name() + "' has shape " + shape_str(input.shape()) +
                     "; its last dimension (the units) must be known when the layer is created");
  if (!is_floating(input.dtype()))
    throw DTypeError("Linear: input '" + input.name() + "' has dtype " + dtype_name(input.dtype()) + " (valid: a floating dtype)");
  auto impl = std::make_shared<LinearImpl>();
  impl->n_units = n_units;
  impl->bias = o.bias;
  impl->transpose_weights = o.transpose_weights;
  impl->weight_init = o.weight_init;
  impl->bias_init = o.bias_init;
  impl->inputs = {input};
  impl->shape = with_units(input.shape(), n_units);
  impl->dtype = input.dtype();
  impl->name = unique_name("linear", name);
  const Shape ws = o.transpose_weights ? Shape{n_units, in} : Shape{in, n_units};
  Tensor w;
  if (o.shared_weights) {
    w = *o.shared_weights;
    if (w.shape() != ws)
      throw ShapeError("Linear '" + impl->name + "': shared weights have shape " + shape_str(w.shape()) + " but " +
                       shape_str(ws) + " is needed" + (o.transpose_weights ? " (transposed)" : ""));
  } else {
    w = initialize(o.weight_init, ws, input.dtype()).requires_grad_();
  }
  impl->state->add_param("weights", w);
  if (o.bias) impl->state->add_param("bias", initialize(o.bias_init, {n_units}, input.dtype()).requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

Linear::Linear(int64_t n_units, LinearOptions o, const std::string& name)
    : Layer(unbound_layer("Linear", [n_units, o](const LayerSpec& s) -> Layer { return Linear(s.input(), n_units, o, s.name); }, name)) {
  if (n_units <= 0) throw ValueError("Linear: n_units must be positive, got " + std::to_string(n_units));
}

Activation::Activation(ActivationFn fn, const std::string& name)
    : Layer(unbound_layer("Activation", [fn](const LayerSpec& s) -> Layer { return Activation(s.input(), fn, s.name); }, name)) {}

Dropout::Dropout(double p, uint64_t seed, const std::string& name)
    : Layer(unbound_layer("Dropout", [p, seed](const LayerSpec& s) -> Layer { return Dropout(s.input(), p, seed, s.name); }, name)) {
  if (!(p >= 0 && p <= 1)) throw ValueError("Dropout: probability must be in [0, 1], got " + fmt_double(p));
}

Activation::Activation(const Layer& input, ActivationFn fn, const std::string& name) {
  require_input(input, "Activation");
  auto impl = std::make_shared<ActivationImpl>();
  impl->fn = std::move(fn);
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = is_floating(input.dtype()) ? input.dtype() : DType::Float32;
  impl->name = unique_name("activation", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Dropout::Dropout(const Layer& input, double probability, uint64_t seed, const std::string& name) {
  require_input(input, "Dropout");
  if (!(probability >= 0 && probability <= 1))
    throw ValueError("Dropout: probability must be in [0, 1], got " + fmt_double(probability));
  auto impl = std::make_shared<DropoutImpl>();
  impl->probability = probability;
  impl->seed = seed;
  impl->state->add_buffer("rng", from_vector<int64_t>({static_cast<int64_t>(seed), 0}, {2}));
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("dropout", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Dropout::Dropout(const Layer& input, const Param& probability, uint64_t seed, const std::string& name)
    : Dropout(input, probability.value(), seed, name) {
  static_cast<DropoutImpl&>(*impl()).param = param_impl(probability).data;
}

Merge::Merge(const std::vector<Layer>& inputs, MergeMode mode, int64_t axis, const std::string& name) {
  static const char* kinds[] = {"Add", "Subtract", "Multiply", "Mean", "Concat"};
  const char* kind = kinds[static_cast<int>(mode)];
  if (mode == MergeMode::Subtract && inputs.size() != 2)
    throw ValueError("Merge: Subtract takes exactly two inputs, got " + std::to_string(inputs.size()));
  static_cast<Layer&>(*this) = Layer(make_merge<Merge>(inputs, mode, axis, name, kind));
}

Add::Add(const std::vector<Layer>& inputs, const std::string& name)
    : Layer(make_merge<Add>(inputs, MergeMode::Sum, -1, name, "Add")) {}
Subtract::Subtract(const Layer& a, const Layer& b, const std::string& name)
    : Layer(make_merge<Subtract>({a, b}, MergeMode::Subtract, -1, name, "Subtract")) {}
Multiply::Multiply(const std::vector<Layer>& inputs, const std::string& name)
    : Layer(make_merge<Multiply>(inputs, MergeMode::Multiply, -1, name, "Multiply")) {}
Concat::Concat(const std::vector<Layer>& inputs, int64_t axis, const std::string& name)
    : Layer(make_merge<Concat>(inputs, MergeMode::Concat, axis, name, "Concat")) {}
Mean::Mean(const std::vector<Layer>& inputs, const std::string& name)
    : Layer(make_merge<Mean>(inputs, MergeMode::Mean, -1, name, "Mean")) {}

Lambda::Lambda(const std::vector<Layer>& inputs, std::function<Tensor(const std::vector<Tensor>&)> fn, Shape shape,
               DType dtype, const std::string& name) {
  for (const Layer& l : inputs) require_input(l, "Lambda");
  auto impl = std::make_shared<LambdaImpl>();
  impl->fn = std::move(fn);
  impl->inputs = inputs;
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  impl->name = unique_name("lambda", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Lambda::Lambda(const std::vector<Layer>& inputs, LambdaFn fn, Shape shape, LambdaState st, const std::string& kind, DType dtype,
               const std::string& name) {
  for (const Layer& l : inputs) require_input(l, "Lambda");
  if (!fn) throw ValueError("Lambda: the function is empty");
  if (kind.empty()) throw ValueError("Lambda: the kind name is empty (use \"Lambda\" for a Lambda that is not saved)");
  auto impl = std::make_shared<LambdaImpl>();
  impl->stateful = std::move(fn);
  impl->kind_name = kind;
  impl->inputs = inputs;
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  impl->name = unique_name("lambda", name);
  for (auto& [k, t] : st.params) {
    if (!t.defined()) throw ValueError("Lambda '" + impl->name + "': parameter '" + k + "' is an undefined tensor");
    if (!t.requires_grad()) t.requires_grad_();
    impl->state->add_param(k, t);
  }
  for (auto& [k, t] : st.buffers) {
    if (!t.defined()) throw ValueError("Lambda '" + impl->name + "': buffer '" + k + "' is an undefined tensor");
    for (const auto& [b, u] : impl->state->buffers())
      if (b == k) throw ValueError("Lambda '" + impl->name + "': buffer '" + k + "' is declared twice");
    impl->state->add_buffer(k, t);
  }
  static_cast<Layer&>(*this) = Layer(impl);
}

Layer operator+(const Layer& a, const Layer& b) { return Add(a, b); }
Layer operator-(const Layer& a, const Layer& b) { return Subtract(a, b); }
Layer operator*(const Layer& a, const Layer& b) { return Multiply(a, b); }
Layer operator*(const Layer& a, double s) {
  return Lambda({a}, [s](const std::vector<Tensor>& t) { return t[0] * s; }, a.shape(), a.dtype(), unique_name("scale"));
}
Layer operator*(double s, const Layer& a) { return a * s; }
Layer operator+(const Layer& a, double s) {
  return Lambda({a}, [s](const std::vector<Tensor>& t) { return t[0] + s; }, a.shape(), a.dtype(), unique_name("shift"));
}

// ---------------------------------------------------------------- registration
namespace {

constexpr int64_t kMaxSize = int64_t{1} << 40;  // sizes and units read from a file

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

void detail::register_basic_layers(AddKind add) {
  add("Input", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(0, 0);
    return Input(s.options.get_ints("shape", -1, kMaxSize), dtype_option(s.options, "dtype"), s.name);
  });
  add("Constant", [](const LayerSpec& s) -> Layer { return Constant(constant_from(s.options), s.name); });
  add("Param", [](const LayerSpec& s) -> Layer { return Param(s.options.get_float("value"), s.name); });
  add("Linear", [](const LayerSpec& s) -> Layer {
    LinearOptions o;
    o.bias = s.options.get_bool("bias");
    o.transpose_weights = s.options.get_bool("transpose_weights");
    o.weight_init = init_from(s.options, "weight_init");
    o.bias_init = init_from(s.options, "bias_init");
    for (const auto& [param, t] : s.tied)
      if (param == "weights") o.shared_weights = t;
    return Linear(s.input(), s.options.get_int("n_units", 1, kMaxSize), o, s.name);
  });
  add("Activation", [](const LayerSpec& s) -> Layer {
    return Activation(s.input(), activation_by_name(s.options.get_string("fn")), s.name);
  });
  add("Dropout", [](const LayerSpec& s) -> Layer {
    return Dropout(s.input(), s.options.get_float("probability"), s.options.get_uint("seed"), s.name);
  });
  add("Add", [](const LayerSpec& s) -> Layer { return Add(s.inputs, s.name); });
  add("Subtract", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return Subtract(s.inputs[0], s.inputs[1], s.name);
  });
  add("Multiply", [](const LayerSpec& s) -> Layer { return Multiply(s.inputs, s.name); });
  add("Mean", [](const LayerSpec& s) -> Layer { return Mean(s.inputs, s.name); });
  add("Concat", [](const LayerSpec& s) -> Layer { return Concat(s.inputs, s.options.get_int("axis", -kMaxSize, kMaxSize), s.name); });
}

// ---------------------------------------------------------------- activation functions
const ActivationFn identity{"identity", [](const Tensor& x) { return x; }};
const ActivationFn relu{"relu", [](const Tensor& x) { return loom::relu(x); }};
const ActivationFn tanh{"tanh", [](const Tensor& x) { return loom::tanh(x); }};
const ActivationFn sigmoid{"sigmoid", [](const Tensor& x) { return loom::sigmoid(x); }};
const ActivationFn gelu{"gelu", [](const Tensor& x) { return loom::gelu(x); }};
const ActivationFn elu{"elu", [](const Tensor& x) { return loom::elu(x); }};
const ActivationFn leaky_relu{"leaky_relu", [](const Tensor& x) { return loom::leaky_relu(x); }};
const ActivationFn softplus{"softplus", [](const Tensor& x) { return loom::softplus(x); }};
const ActivationFn softmax{"softmax", [](const Tensor& x) { return loom::softmax(x, -1); }};
const ActivationFn log_softmax{"log_softmax", [](const Tensor& x) { return loom::log_softmax(x, -1); }};

const ActivationFn& activation_by_name(const std::string& name) {
  static const ActivationFn* all[] = {&identity, &relu, &tanh, &sigmoid, &gelu, &elu, &leaky_relu, &softplus, &softmax, &log_softmax};
  std::string known;
  for (const ActivationFn* f : all) {
    if (f->name == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
  }
  throw ValueError("activation_by_name: unknown activation '" + name + "' (known: " + known + ")");
}

void register_lambda_kind(const std::string& kind, LambdaFn fn) {
  if (!fn) throw ValueError("register_lambda_kind: kind '" + kind + "' has an empty function");
  if (kind == "Lambda") throw ValueError("register_lambda_kind: \"Lambda\" is the kind of Lambdas that are not saved (choose another name)");
  register_layer_kind(kind, [kind, fn](const LayerSpec& s) -> Layer {
    LambdaState st;
    for (bool buffers : {false, true}) {
      const char* key = buffers ? "buffers" : "params";
      if (!s.options.has(key) || !json_of(s.options).at(key).is_array()) s.options.fail(std::string("field '") + key + "' is missing or not a JSON array");
      for (const json& e : json_of(s.options).at(key)) {
        const Options t = options_from(e, s.options.where() + " " + key);
        const std::string name = t.get_string("name");
        Tensor value = zeros(t.get_ints("shape", 0, kMaxSize), dtype_option(t, "dtype"));  // the file's values are copied in
        (buffers ? st.buffers : st.params).emplace_back(name, value);
      }
    }
    return Lambda(s.inputs, fn, s.options.get_ints("shape", -1, kMaxSize), st, kind, dtype_option(s.options, "dtype"), s.name);
  });
}

}  // namespace loom::nn
