#pragma once
// TensorX layers: a Layer is a stateful function and, at once, the end node of the graph of
// layers that feeds it.
//   l()                runs the graph that ends in l, reading each Input's current value;
//   l.compute(t...)    runs only l's own op on the given tensors;
//   l.reuse_with(x...) makes a layer of the same kind on new inputs sharing l's State;
//   l(x), l({x, y})    the Keras-style call: reuse_with, or for a layer made without input
//                      (nn::Linear dense(128)) the first call builds it on x (see unbound_layer).
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/nn/attributes.h"
#include "loom/nn/mode.h"
#include "loom/nn/options.h"
#include "loom/nn/state.h"

namespace loom::nn {

class LayerImpl;

class LOOM_API Layer {
 public:
  Layer() = default;
  explicit Layer(std::shared_ptr<LayerImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const std::shared_ptr<LayerImpl>& impl() const { return impl_; }

  // Evaluates the graph ending in this layer in the current mode (see ModeScope).
  Tensor operator()() const;
  // Calls the layer on new inputs. A layer made without input (nn::Linear dense(128); kind
  // templates, nn/registry.h unbound_layer) is bound by its first call, which builds the layer,
  // its state shaped by the inputs, named name(); every later call, and a call of any other
  // layer, is reuse_with(inputs): the new layer shares the state.
  Layer operator()(const Layer& input) const { return (*this)(std::vector<Layer>{input}); }
  Layer operator()(const std::vector<Layer>& inputs) const;
  // Calls the layer on a tensor: its value, at once (Keras' layer(tensor), PyTorch's
  // module(x)), in the current mode, with gradients to its parameters — this layer alone, not
  // the graph before it (that is operator()()). A layer made without input is first bound, as
  // by a call on an Input of the tensor's shape (batch -1) and dtype. One-input layers; several:
  // compute({x1, x2}).
  Tensor operator()(const Tensor& x) const;
  // False for a layer made without input that has not been called yet (its shape, state, ...
  // throw ValueError until then); a bound one stands for the layer its first call built.
  bool bound() const;
  // The graph node this handle stands for: itself, or for a layer made without input the layer
  // its first call built (ValueError naming the layer while unbound).
  Layer node() const;
  Tensor compute(const std::vector<Tensor>& inputs) const;
  Tensor compute(const Tensor& x) const { return compute(std::vector<Tensor>{x}); }
  Layer reuse_with(const std::vector<Layer>& inputs, const std::string& name = "") const;
  Layer reuse_with(const Layer& input, const std::string& name = "") const {
    return reuse_with(std::vector<Layer>{input}, name);
  }

  const std::string& name() const;
  const char* kind() const;
  const std::vector<Layer>& inputs() const;
  // Output shape; -1 marks a dimension only known at run time (the batch).
  const Shape& shape() const;
  int64_t n_units() const;  // the last dimension of the output
  DType dtype() const;
  State& state() const;
  const std::shared_ptr<State>& shared_state() const;
  // Trainable tensors of this layer's state (and inner states), each once. weights() is the
  // same list under TensorX's and Keras' name (Keras' weights also holds non-trainable ones).
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> weights() const { return parameters(); }
  // The layer's options (kind-specific; what its registered factory rebuilds it from).
  Options options() const;

  bool operator==(const Layer& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<LayerImpl> impl_;
};

// "Linear 'dense_1' (-1, 8)": kind, name and output shape.
LOOM_API std::ostream& operator<<(std::ostream& os, const Layer& layer);

// Base of every layer kind. Kinds implement compute and clone; the base holds the graph links.
// A kind that is saved and loaded also writes its options and registers a factory that
// rebuilds it from them (nn/registry.h; docs/layers.md, "Writing a layer").
class LOOM_API LayerImpl {
 public:
  // Not recursive: a layer holds its inputs, so the last handle to a chain of a million
  // layers would otherwise destroy them a stack frame per layer.
  virtual ~LayerImpl();
  virtual const char* kind() const = 0;
  // The layer's op on tensors, one per input (the mode selects train/eval behaviour).
  virtual Tensor compute(const std::vector<Tensor>& inputs, Mode mode) = 0;
  virtual std::shared_ptr<LayerImpl> clone() const = 0;
  // Everything besides inputs, name and state that rebuilds this layer (sizes, flags).
  virtual Options options() const { return {}; }
  // The kind's shape rule: its output shape(s) for inputs of these shapes (-1: a size known only
  // at run time, the batch usually). A layer's shape comes from it when the layer is built, on
  // reuse_with, and in compile() for given input shapes (nothing is run to learn a shape).
  // ShapeError when inputs of these shapes cannot be taken. The default, for kinds that declare
  // no rule (Lambda, a user's kind): the layer's own shape, its leading -1 taking the batch of
  // the inputs whose leading size is a batch.
  virtual std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const;
  // The kind's attributes struct when it is of type `type` (nn/attributes.h), else nullptr.
  virtual const void* attributes(const std::type_info& /*type*/) const { return nullptr; }
  // True when `other` is a layer of the same kind with the same options (the compiler merges
  // such layers on the same inputs and state). The default compares the options' JSON.
  virtual bool same_options(const LayerImpl& other) const;
  // Called by reuse_with: checks the count, definedness and dtypes of the new inputs (their
  // shapes are the shape rule's to check).
  virtual void check_inputs(const std::vector<Layer>& inputs) const;
  // Several outputs (a Module over a graph with several): compute_outputs returns them all and
  // compute the first; a ModuleOutput layer reads output reads_output() of its one input.
  virtual size_t n_outputs() const { return 1; }
  virtual std::vector<Tensor> compute_outputs(const std::vector<Tensor>& inputs, Mode mode) { return {compute(inputs, mode)}; }
  virtual size_t reads_output() const { return 0; }
  // True for a layer made without input (unbound_layer, nn/registry.h).
  virtual bool is_template() const { return false; }
  // True when compute is a function of the input tensors, options and State alone, the same in
  // every mode: no randomness, no writes to State, no outside reads. Only pure layers are merged
  // (common subexpressions) or folded (constants) by the graph compiler (docs/compile.md), so a
  // kind says so explicitly; the default is the safe false.
  virtual bool pure() const { return false; }

  // The plan Layer::operator()() runs, compiled on its first call and kept (the graph that ends
  // in a layer does not change). Evaluation belongs to graph, above nn, so nn holds it opaquely;
  // a copy (clone, reuse_with) starts empty.
  struct EvalCache {
    EvalCache() = default;
    EvalCache(const EvalCache&) {}
    EvalCache& operator=(const EvalCache&) { return *this; }
    std::mutex mutex;
    std::shared_ptr<const void> plan;
  };
  EvalCache eval_cache;

  std::string name;
  std::vector<Layer> inputs;
  std::shared_ptr<State> state = std::make_shared<State>();
  Shape shape;
  DType dtype = DType::Float32;
};

// Clone for a concrete kind.
template <typename Derived>
class LayerBase : public LayerImpl {
 public:
  std::shared_ptr<LayerImpl> clone() const override {
    return std::make_shared<Derived>(static_cast<const Derived&>(*this));
  }
};

// A kind whose attributes are the struct A (nn/attributes.h): its options(), its factory's
// reads (read_attributes) and the compiler's equality come from A's one field list, and
// attributes_of<A>(layer) reads them by type.
template <typename Derived, typename A>
class KindBase : public LayerBase<Derived> {
 public:
  A attrs;
  Options options() const override { return write_attributes(attrs); }
  const void* attributes(const std::type_info& type) const override { return type == typeid(A) ? &attrs : nullptr; }
  bool same_options(const LayerImpl& other) const override {
    const void* theirs = other.attributes(typeid(A));
    return theirs && std::string(this->kind()) == other.kind() && same_attributes(attrs, *static_cast<const A*>(theirs));
  }
};

// The attributes of type A of the layer (the layer its first call built, for a layer made
// without input), or nullptr when it is of another kind or not bound yet.
template <typename A>
const A* attributes_of(const Layer& layer) {
  if (!layer.defined() || !layer.bound()) return nullptr;
  return static_cast<const A*>(layer.node().impl()->attributes(typeid(A)));
}

// A unique name "<prefix>_<n>" unless `name` is given.
LOOM_API std::string unique_name(const std::string& prefix, const std::string& name = "");

}  // namespace loom::nn
