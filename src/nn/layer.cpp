#include "loom/nn/layer.h"

#include <atomic>
#include <ostream>
#include <unordered_map>
#include <unordered_set>

namespace loom::nn {

namespace {
LayerImpl& require(const std::shared_ptr<LayerImpl>& impl, const char* what) {
  if (!impl) throw ValueError(std::string("Layer::") + what + ": the layer is undefined (default-constructed)");
  return *impl;
}
}  // namespace

std::string unique_name(const std::string& prefix, const std::string& name) {
  static std::atomic<uint64_t> counter{0};
  if (!name.empty()) return name;
  return prefix + "_" + std::to_string(++counter);
}

void LayerImpl::check_inputs(const std::vector<Layer>& new_inputs) const {
  if (new_inputs.size() != inputs.size())
    throw ValueError(std::string(kind()) + " '" + name + "': reuse_with got " + std::to_string(new_inputs.size()) +
                     " inputs, the layer takes " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Layer& a = inputs[i];
    const Layer& b = new_inputs[i];
    if (!b.defined()) throw ValueError(std::string(kind()) + " '" + name + "': reuse_with got an undefined input");
    if (a.n_units() != b.n_units() && a.n_units() >= 0 && b.n_units() >= 0)
      throw ShapeError(std::string(kind()) + " '" + name + "': reuse_with input " + std::to_string(i) + " ('" + b.name() +
                       "') has " + std::to_string(b.n_units()) + " units but the shared state expects " +
                       std::to_string(a.n_units()) + " (from '" + a.name() + "')");
    if (a.dtype() != b.dtype())
      throw DTypeError(std::string(kind()) + " '" + name + "': reuse_with input '" + b.name() + "' has dtype " +
                       dtype_name(b.dtype()) + " but '" + a.name() + "' has " + dtype_name(a.dtype()));
  }
}

Tensor Layer::operator()() const {
  require(impl_, "operator()");
  const Mode mode = current_mode();
  std::unordered_map<const LayerImpl*, Tensor> values;
  std::unordered_set<const LayerImpl*> active;
  auto eval = [&](auto&& self, const Layer& l) -> Tensor {
    const LayerImpl* key = l.impl().get();
    if (auto it = values.find(key); it != values.end()) return it->second;
    if (!active.insert(key).second)
      throw ValueError("Layer::operator(): the graph has a cycle through '" + l.name() + "'");
    std::vector<Tensor> in;
    for (const Layer& i : l.inputs()) in.push_back(self(self, i));
    Tensor out = l.impl()->compute(in, mode);
    active.erase(key);
    values.emplace(key, out);
    return out;
  };
  return eval(eval, *this);
}

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
  // state is the same shared object: training either layer updates both
  if (!inputs.empty() && !l.shape.empty()) {
    // dynamic leading dims follow the new inputs
    copy->shape[0] = inputs[0].shape().empty() ? copy->shape[0] : inputs[0].shape()[0];
  }
  return Layer(copy);
}

const std::string& Layer::name() const { return require(impl_, "name").name; }
const char* Layer::kind() const { return require(impl_, "kind").kind(); }
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
  return os << l.kind() << " '" << l.name() << "' " << shape_str(l.shape());
}

}  // namespace loom::nn
