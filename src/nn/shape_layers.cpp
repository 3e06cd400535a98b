#include "loom/nn/shape_layers.h"

#include <cstdio>

#include "loom/ops/creation.h"
#include "nn/init_options.h"
#include "nn/options_json.h"
#include "nn/register_kinds.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"

namespace loom::nn {

namespace {

void require(const Layer& l, const char* kind) {
  if (!l.defined()) throw ValueError(std::string(kind) + ": an input layer is undefined");
}

struct ReshapeImpl final : LayerBase<ReshapeImpl> {
  bool pure() const override { return true; }
  Shape target;  // without the batch axis
  const char* kind() const override { return "Reshape"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Shape s{in[0].ndim() ? in[0].shape()[0] : 1};
    s.insert(s.end(), target.begin(), target.end());
    return reshape(in[0], s);
  }
  Options options() const override { return Options().set_ints("shape", target); }
};

struct TransposeImpl final : LayerBase<TransposeImpl> {
  bool pure() const override { return true; }
  Axes perm;
  const char* kind() const override { return "Transpose"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes p{0};
    for (int64_t a : perm) p.push_back(a + 1);
    return permute(in[0], p);
  }
  Options options() const override { return Options().set_ints("perm", perm); }
};

struct FlipImpl final : LayerBase<FlipImpl> {
  bool pure() const override { return true; }
  Axes axes;  // after the batch axis
  const char* kind() const override { return "Flip"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes a;
    for (int64_t x : axes) a.push_back(x + 1);
    return flip(in[0], a);
  }
  Options options() const override { return Options().set_ints("axes", axes); }
};

struct ResidualImpl final : LayerBase<ResidualImpl> {
  bool pure() const override { return true; }
  bool project = false;
  const char* kind() const override { return "Residual"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return (project ? matmul(in[0], state->param("projection")) : in[0]) + in[1];
  }
};

struct GateImpl final : LayerBase<GateImpl> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Gate"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return in[0] * sigmoid(matmul(in[1], state->param("weights")) + state->param("bias"));
  }
};

struct OneHotImpl final : LayerBase<OneHotImpl> {
  bool pure() const override { return true; }
  int64_t n_classes = 0;
  const char* kind() const override { return "OneHot"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Tensor classes = arange(n_classes, DType::Int64, in[0].device());
    return astype(equal(expand_dims(astype(in[0], DType::Int64), -1), classes), dtype);
  }
  Options options() const override { return Options().set_int("n_classes", n_classes).set_string("dtype", dtype_name(dtype)); }
};

struct LookupImpl final : LayerBase<LookupImpl> {
  bool pure() const override { return true; }
  int64_t vocab = 0, n_units = 0, padding_id = -1;
  Init init;
  const char* kind() const override { return "Lookup"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return embedding(state->param("weights"), in[0], padding_id);
  }
  Options options() const override {
    return Options()
        .set_int("vocab_size", vocab)
        .set_int("n_units", n_units)
        .set_int("padding_id", padding_id)
        .set_object("init", detail::init_options(init));
  }
};

}  // namespace

Reshape::Reshape(const Layer& input, const Shape& shape, const std::string& name) {
  require(input, "Reshape");
  auto impl = std::make_shared<ReshapeImpl>();
  impl->target = shape;
  // the per-sample element count must match when known
  int64_t known = 1, infer = 0;
  for (int64_t d : shape) {
    if (d == -1) ++infer;
    else known = checked_mul(known, d, "Reshape");
  }
  int64_t have = 1;
  bool dynamic = false;
  for (size_t i = 1; i < input.shape().size(); ++i) {
    if (input.shape()[i] < 0) dynamic = true;
    else have = checked_mul(have, input.shape()[i], "Reshape");
  }
  Shape out{input.shape().empty() ? -1 : input.shape()[0]};
  for (int64_t d : shape) out.push_back(d == -1 && !dynamic && known > 0 ? have / known : d);
  if (infer > 1 || (!dynamic && (infer ? have % known != 0 : have != known)))
    throw ShapeError("Reshape: samples of shape " + shape_str(Shape(input.shape().begin() + std::min<size_t>(1, input.shape().size()), input.shape().end())) +
                     " from '" + input.name() + "' cannot be reshaped to " + shape_str(shape));
  impl->inputs = {input};
  impl->shape = out;
  impl->dtype = input.dtype();
  impl->name = unique_name("reshape", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Flatten::Flatten(const Layer& input, const std::string& name) : Layer(Reshape(input, {-1}, unique_name("flatten", name)).impl()) {}

// the forms without input (bound by their first call; nn/registry.h unbound_layer)
Reshape::Reshape(const Shape& shape, const std::string& name)
    : Layer(unbound_layer("Reshape", [shape](const LayerSpec& s) -> Layer { return Reshape(s.input(), shape, s.name); }, name)) {}
Flatten::Flatten() : Layer(unbound_layer("Reshape", [](const LayerSpec& s) -> Layer { return Reshape(s.input(), {-1}, s.name); }, unique_name("flatten"))) {}

Transpose::Transpose(const Layer& input, const Axes& perm, const std::string& name) {
  require(input, "Transpose");
  const int64_t rank = static_cast<int64_t>(input.shape().size()) - 1;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  if (static_cast<int64_t>(perm.size()) != rank)
    throw ValueError("Transpose: perm " + shape_str(perm) + " must permute the " + std::to_string(rank) + " non-batch axes of '" +
                     input.name() + "' " + shape_str(input.shape()));
  auto impl = std::make_shared<TransposeImpl>();
  Shape out{input.shape()[0]};
  for (int64_t a : perm) {
    if (a < 0 || a >= rank || seen[a]) throw ValueError("Transpose: perm " + shape_str(perm) + " is not a permutation of 0.." + std::to_string(rank - 1));
    seen[a] = true;
    out.push_back(input.shape()[a + 1]);
  }
  impl->perm = perm;
  impl->inputs = {input};
  impl->shape = out;
  impl->dtype = input.dtype();
  impl->name = unique_name("transpose", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Flip::Flip(const Layer& input, const Axes& axes, const std::string& name) {
  require(input, "Flip");
  const int64_t rank = static_cast<int64_t>(input.shape().size()) - 1;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  if (axes.empty())
    throw ValueError("Flip: no axes given for '" + input.name() + "' " + shape_str(input.shape()) +
                     " (valid: axes after the batch axis, 0.." + std::to_string(rank - 1) + ")");
  for (int64_t a : axes) {
    if (a < 0 || a >= rank || seen[a])
      throw ValueError("Flip: axes " + shape_str(axes) + " must be distinct axes after the batch axis of '" + input.name() +
                       "' " + shape_str(input.shape()) + " (valid: 0.." + std::to_string(rank - 1) + ")");
    seen[a] = true;
  }
  auto impl = std::make_shared<FlipImpl>();
  impl->axes = axes;
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("flip", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Residual::Residual(const Layer& input, const Layer& block, const std::string& name) {
  require(input, "Residual");
  require(block, "Residual");
  auto impl = std::make_shared<ResidualImpl>();
  impl->inputs = {input, block};
  impl->shape = block.shape();
  impl->dtype = block.dtype();
  impl->name = unique_name("residual", name);
  if (input.n_units() != block.n_units()) {
    impl->project = true;
    impl->state->add_param("projection", initialize(Init::glorot_uniform(), {input.n_units(), block.n_units()}, block.dtype()).requires_grad_());
  }
  static_cast<Layer&>(*this) = Layer(impl);
}

Gate::Gate(const Layer& input, const Layer& gate_input, const std::string& name) {
  require(input, "Gate");
  require(gate_input, "Gate");
  auto impl = std::make_shared<GateImpl>();
  impl->inputs = {input, gate_input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("gate", name);
  impl->state->add_param("weights", initialize(Init::glorot_uniform(), {gate_input.n_units(), input.n_units()}, input.dtype()).requires_grad_());
  impl->state->add_param("bias", initialize(Init::zeros(), {input.n_units()}, input.dtype()).requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

OneHot::OneHot(const Layer& ids, int64_t n_classes, DType dtype, const std::string& name) {
  require(ids, "OneHot");
  if (n_classes <= 0) throw ValueError("OneHot: n_classes must be positive, got " + std::to_string(n_classes));
  if (!is_integral(ids.dtype()))
    throw DTypeError("OneHot: ids '" + ids.name() + "' have dtype " + dtype_name(ids.dtype()) + " (valid: an integer dtype)");
  auto impl = std::make_shared<OneHotImpl>();
  impl->n_classes = n_classes;
  impl->inputs = {ids};
  impl->shape = ids.shape();
  impl->shape.push_back(n_classes);
  impl->dtype = dtype;
  impl->name = unique_name("one_hot", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Lookup::Lookup(const Layer& ids, int64_t vocab_size, int64_t n_units, LookupOptions o, const std::string& name) {
  require(ids, "Lookup");
  if (!is_integral(ids.dtype()))
    throw DTypeError("Lookup: ids '" + ids.name() + "' have dtype " + dtype_name(ids.dtype()) + " (valid: an integer dtype)");
  if (vocab_size <= 0 || n_units <= 0)
    throw ValueError("Lookup: vocab_size and n_units must be positive, got " + std::to_string(vocab_size) + " and " + std::to_string(n_units));
  if (o.padding_id >= vocab_size)
    throw ValueError("Lookup: padding_id " + std::to_string(o.padding_id) + " is outside the vocabulary of " + std::to_string(vocab_size));
  auto impl = std::make_shared<LookupImpl>();
  impl->vocab = vocab_size;
  impl->n_units = n_units;
  impl->padding_id = o.padding_id;
  impl->init = o.init;
  impl->inputs = {ids};
  impl->shape = ids.shape();
  impl->shape.push_back(n_units);
  impl->dtype = DType::Float32;
  impl->name = unique_name("lookup", name);
  Tensor table = initialize(o.init, {vocab_size, n_units});
  if (o.padding_id >= 0) table.index_put_({o.padding_id}, 0.0);
  impl->state->add_param("weights", table.requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

namespace {
constexpr int64_t kMaxSize = int64_t{1} << 40;  // sizes and units read from a file
}  // namespace

void detail::register_shape_layers(AddKind add) {
  add("Reshape", [](const LayerSpec& s) -> Layer { return Reshape(s.input(), s.options.get_ints("shape", -1, kMaxSize), s.name); });
  add("Transpose",
      [](const LayerSpec& s) -> Layer { return Transpose(s.input(), s.options.get_ints("perm", -kMaxSize, kMaxSize), s.name); });
  add("Flip", [](const LayerSpec& s) -> Layer { return Flip(s.input(), s.options.get_ints("axes", -kMaxSize, kMaxSize), s.name); });
  add("Residual", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return Residual(s.inputs[0], s.inputs[1], s.name);
  });
  add("Gate", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return Gate(s.inputs[0], s.inputs[1], s.name);
  });
  add("OneHot", [](const LayerSpec& s) -> Layer {
    return OneHot(s.input(), s.options.get_int("n_classes", 1, kMaxSize), dtype_option(s.options, "dtype"), s.name);
  });
  add("Lookup", [](const LayerSpec& s) -> Layer {
    LookupOptions o;
    o.padding_id = s.options.get_int("padding_id", -1, kMaxSize);
    o.init = init_from(s.options, "init");
    return Lookup(s.input(), s.options.get_int("vocab_size", 1, kMaxSize), s.options.get_int("n_units", 1, kMaxSize), o, s.name);
  });
}

}  // namespace loom::nn
