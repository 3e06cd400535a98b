#include "loom/nn/layer.h"

#include "loom/nn/input.h"
#include "loom/nn/registry.h"
#include "nn/options_json.h"

#include <atomic>
#include <cctype>
#include <mutex>
#include <ostream>
#include <unordered_map>
#include <unordered_set>

namespace loom::nn {

namespace {

// A layer made without input: `factory` builds the real layer on the first call's inputs; the
// handle then stands for it. Binding is under a mutex (a template may be shared by threads).
struct TemplateImpl final : LayerImpl {
  std::string kind_name;
  LayerFactory factory;
  mutable std::mutex mutex;
  std::shared_ptr<LayerImpl> first;  // the layer the first call built

  const char* kind() const override { return kind_name.c_str(); }
  bool is_template() const override { return true; }
  std::shared_ptr<LayerImpl> clone() const override { return node("reuse_with")->clone(); }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override { return node("compute")->compute(in, mode); }
  std::shared_ptr<LayerImpl> node(const char* what) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (!first)
      throw ValueError(std::string("Layer::") + what + ": " + kind_name + " '" + name +
                       "' was made without an input and has not been called yet, so it has no shape or state: call it on its "
                       "input first (Layer h = " + name + "(x)), or construct it with its input");
    return first;
  }
  Layer call(const std::vector<Layer>& in) {
    for (const Layer& l : in)
      if (l.impl().get() == this) throw ValueError(kind_name + " '" + name + "': called on itself (a layer cannot be its own input)");
    std::shared_ptr<LayerImpl> built;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!first) {
        for (const Layer& l : in)
          if (!l.defined()) throw ValueError(kind_name + " '" + name + "': called on an undefined input layer");
        Options options;
        options.impl().where = kind_name + " '" + name + "'";
        Layer l = factory(LayerSpec{name, in, options, {}});
        if (!l.defined() || l.name() != name || l.kind() != kind_name)
          throw ValueError(kind_name + " '" + name + "': its builder made " + (l.defined() ? std::string(l.kind()) + " '" + l.name() + "'" : "no layer") +
                           " (it must build a " + kind_name + " named '" + name + "')");
        first = l.impl();
        return l;
      }
      built = first;
    }
    return Layer(built).reuse_with(in);
  }
};

LayerImpl& require_defined(const std::shared_ptr<LayerImpl>& impl, const char* what) {
  if (!impl) throw ValueError(std::string("Layer::") + what + ": the layer is undefined (default-constructed)");
  return *impl;
}

// The node a handle stands for (a bound template's first layer).
LayerImpl& require(const std::shared_ptr<LayerImpl>& impl, const char* what) {
  if (!impl) throw ValueError(std::string("Layer::") + what + ": the layer is undefined (default-constructed)");
  if (impl->is_template()) return *static_cast<const TemplateImpl&>(*impl).node(what);
  return *impl;
}

}  // namespace

Layer unbound_layer(const std::string& kind, LayerFactory factory, const std::string& name) {
  if (kind.empty()) throw ValueError("unbound_layer: the kind name is empty");
  if (!factory) throw ValueError("unbound_layer: kind '" + kind + "' has an empty builder");
  auto impl = std::make_shared<TemplateImpl>();
  impl->kind_name = kind;
  impl->factory = std::move(factory);
  std::string prefix;
  for (char c : kind) prefix += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  impl->name = unique_name(prefix, name);
  return Layer(impl);
}

Layer unbound_layer(const std::string& kind, const Options& options, const std::string& name) {
  return unbound_layer(
      kind,
      [kind, options](const LayerSpec& s) {
        LayerSpec spec = s;
        spec.options = options;
        spec.options.impl().where = s.options.where();
        return make_layer(kind, spec);
      },
      name);
}

Layer Layer::operator()(const std::vector<Layer>& inputs) const {
  if (!impl_) throw ValueError("Layer::operator(): the layer is undefined (default-constructed)");
  if (impl_->is_template()) return static_cast<TemplateImpl&>(*impl_).call(inputs);
  return reuse_with(inputs);
}

Tensor Layer::operator()(const Tensor& x) const {
  if (!impl_) throw ValueError("Layer::operator(): the layer is undefined (default-constructed)");
  if (!x.defined()) throw ValueError("Layer::operator(): " + std::string(kind()) + " '" + name() + "' called on an undefined tensor");
  if (!bound()) {  // Keras: the first call on a tensor builds the layer for the tensor's shape
    Shape s = x.shape();
    if (!s.empty()) s[0] = -1;
    (*this)(Input(s, x.dtype()));
  }
  const Layer l = node();
  if (l.inputs().size() != 1)
    throw ValueError("Layer::operator(): " + std::string(l.kind()) + " '" + l.name() + "' takes " + std::to_string(l.inputs().size()) +
                     " inputs; call compute({x1, x2, ...}) with one tensor each");
  return l.compute(std::vector<Tensor>{x});
}

bool Layer::bound() const {
  if (!impl_ || !impl_->is_template()) return defined();
  const auto& t = static_cast<const TemplateImpl&>(*impl_);
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.first != nullptr;
}

Layer Layer::node() const {
  if (impl_ && impl_->is_template()) return Layer(static_cast<const TemplateImpl&>(*impl_).node("node"));
  return *this;
}

std::string unique_name(const std::string& prefix, const std::string& name) {
  static std::atomic<uint64_t> counter{0};
  if (!name.empty()) return name;
  return prefix + "_" + std::to_string(++counter);
}

// As ~Node (core/tensor.cpp): the inputs this layer holds last are destroyed by the outermost
// ~LayerImpl on this thread, in a loop, not inside this destructor.
LayerImpl::~LayerImpl() {
  thread_local std::vector<std::shared_ptr<LayerImpl>>* deferred = nullptr;  // the outermost's, on its stack
  std::vector<std::shared_ptr<LayerImpl>> mine;
  const bool outermost = deferred == nullptr;
  if (outermost) deferred = &mine;
  for (Layer& l : inputs) {
    std::shared_ptr<LayerImpl> p = l.impl();
    l = Layer();
    if (p && p.use_count() == 1) deferred->push_back(std::move(p));
  }
  if (!outermost) return;
  while (!mine.empty()) {
    std::shared_ptr<LayerImpl> p = std::move(mine.back());
    mine.pop_back();
    p.reset();  // may defer more, into `mine`
  }
  deferred = nullptr;
}

void LayerImpl::check_inputs(const std::vector<Layer>& new_inputs) const {
  if (new_inputs.size() != inputs.size())
    throw ValueError(std::string(kind()) + " '" + name + "': reuse_with got " + std::to_string(new_inputs.size()) +
                     " inputs, the layer takes " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Layer& a = inputs[i];
    const Layer& b = new_inputs[i];
    if (!b.defined()) throw ValueError(std::string(kind()) + " '" + name + "': reuse_with got an undefined input");
    if (a.dtype() != b.dtype())
      throw DTypeError(std::string(kind()) + " '" + name + "': reuse_with input '" + b.name() + "' has dtype " +
                       dtype_name(b.dtype()) + " but '" + a.name() + "' has " + dtype_name(a.dtype()));
  }
}

std::vector<Shape> LayerImpl::output_shapes(const std::vector<Shape>& given) const {
  // the units (last size) the state was made for, where both are known
  for (size_t i = 0; i < given.size() && i < inputs.size(); ++i) {
    const Shape& declared = inputs[i].shape();
    const int64_t want = declared.empty() ? 1 : declared.back(), got = given[i].empty() ? 1 : given[i].back();
    if (want >= 0 && got >= 0 && want != got)
      throw ShapeError(std::string(kind()) + " '" + name + "': input " + std::to_string(i) + " has shape " + shape_str(given[i]) + ", " +
                       std::to_string(got) + " units, but the layer's state expects " + std::to_string(want) + " (from '" +
                       inputs[i].name() + "')");
  }
  Shape out = shape;
  if (out.empty() || out[0] != -1) return {out};
  int64_t batch = -1;
  size_t from = 0;
  for (size_t i = 0; i < given.size() && i < inputs.size(); ++i) {
    const Shape& declared = inputs[i].shape();
    if (given[i].empty() || declared.empty() || declared[0] != -1 || given[i][0] < 0) continue;
    if (batch >= 0 && given[i][0] != batch && given[i][0] != 1 && batch != 1)
      throw ShapeError(std::string(kind()) + " '" + name + "' combines a batch of " + std::to_string(batch) + " (from '" +
                       inputs[from].name() + "') with a batch of " + std::to_string(given[i][0]) + " (from '" + inputs[i].name() + "')");
    if (batch < 0 || batch == 1) batch = given[i][0], from = i;
  }
  if (batch >= 0) out[0] = batch;
  return {out};
}

bool LayerImpl::same_options(const LayerImpl& other) const {
  return std::string(kind()) == other.kind() && options().to_json() == other.options().to_json();
}

// Layer::operator()() is defined in src/graph/eval.cpp: it runs a Plan, the one evaluator.

Tensor Layer::compute(const std::vector<Tensor>& inputs) const {
  LayerImpl& l = require(impl_, "compute");
  if (inputs.size() != l.inputs.size())
    throw ValueError(std::string(l.kind()) + " '" + l.name + "': compute got " + std::to_string(inputs.size()) +
                     " tensors, the layer takes " + std::to_string(l.inputs.size()));
  return l.compute(inputs, current_mode());
}

Layer Layer::reuse_with(const std::vector<Layer>& inputs, const std::string& name) const {
  const LayerImpl& l = require(impl_, "reuse_with");
  l.check_inputs(inputs);
  std::shared_ptr<LayerImpl> copy = l.clone();
  copy->inputs = inputs;
  copy->name = unique_name(l.name + "_reuse", name);
  // state is the same shared object: training either layer updates both. The shape follows the
  // new inputs by the kind's rule (their batch, and spatial sizes or lengths where they differ).
  std::vector<Shape> in_shapes;
  for (const Layer& i : inputs) {
    // a layer reading output k > 0 of a node with several (a Module's) reads that output's shape
    const size_t k = l.reads_output();
    if (k == 0 || i.impl()->n_outputs() < 2) {
      in_shapes.push_back(i.shape());
      continue;
    }
    std::vector<Shape> outer;
    for (const Layer& j : i.inputs()) outer.push_back(j.shape());
    in_shapes.push_back(i.node().impl()->output_shapes(outer).at(k));
  }
  try {
    copy->shape = l.output_shapes(in_shapes).at(0);
  } catch (const ShapeError& e) {
    std::string names;
    for (const Layer& i : inputs) names += (names.empty() ? "'" : ", '") + i.name() + "' " + shape_str(i.shape());
    throw ShapeError(std::string(e.what()) + " (reuse_with on " + names + ")");
  }
  return Layer(copy);
}

// a template's own name and kind (those of the layer its first call builds)
const std::string& Layer::name() const { return require_defined(impl_, "name").name; }
const char* Layer::kind() const { return require_defined(impl_, "kind").kind(); }
const std::vector<Layer>& Layer::inputs() const { return require(impl_, "inputs").inputs; }
const Shape& Layer::shape() const { return require(impl_, "shape").shape; }
int64_t Layer::n_units() const {
  const Shape& s = shape();
  return s.empty() ? 1 : s.back();
}
DType Layer::dtype() const { return require(impl_, "dtype").dtype; }
State& Layer::state() const { return *require(impl_, "state").state; }
const std::shared_ptr<State>& Layer::shared_state() const { return require(impl_, "state").state; }
std::vector<Tensor> Layer::parameters() const {
  std::vector<Tensor> out;
  for (auto& [k, v] : state().all_params()) out.push_back(v);
  return out;
}
Options Layer::options() const { return require(impl_, "options").options(); }

std::ostream& operator<<(std::ostream& os, const Layer& l) {
  if (!l.defined()) return os << "Layer(undefined)";
  if (!l.bound()) return os << l.kind() << " '" << l.name() << "' (not called yet)";
  return os << l.kind() << " '" << l.name() << "' " << shape_str(l.shape());
}

}  // namespace loom::nn
