#include "loom/nn/lambda.h"

#include "nn/kind_util.h"
#include "nn/options_json.h"
#include "loom/ops/creation.h"

namespace loom::nn {

using detail::kMaxSize;
using detail::require_input;

namespace {

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
