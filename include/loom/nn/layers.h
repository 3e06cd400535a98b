#pragma once
// The basic layer catalogue. Each kind is a Layer handle with a constructor taking its input
// layers and options; parameters are created in the constructor (the inputs' units are known).
// The common kinds also have a constructor without the input (Keras style): the layer is built
// by its first call, dense(x), and later calls share its state (Layer::operator(), unbound_layer).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loom/nn/init.h"
#include "loom/nn/layer.h"

namespace loom::nn {

// A stateful placeholder. shape may hold -1 for dimensions fixed only at run time; an Input of
// n_units has shape (-1, n_units).
class Input : public Layer {
 public:
  explicit Input(int64_t n_units, DType dtype = Float32, const std::string& name = "");
  Input(const Shape& shape, DType dtype, const std::string& name = "");
  // Checks the value's shape (dynamic dims match anything) and dtype.
  void set_value(const Tensor& value) const;
  // Value used when none was set.
  void set_default(const Tensor& value) const;
  bool has_value() const;
  Tensor value() const;  // throws ValueError naming the input when it holds none
  void clear() const;
  explicit Input(std::shared_ptr<LayerImpl> impl);  // view a Layer of kind "Input" as Input
};

// A fixed tensor as a layer.
class Constant : public Layer {
 public:
  explicit Constant(const Tensor& value, const std::string& name = "");
};

// A scalar hyperparameter (learning rate, dropout probability) that can change while training;
// observers are called with the new value.
class Param : public Layer {
 public:
  explicit Param(double value, const std::string& name = "");
  double value() const;
  void set_value(double value) const;
  void observe(std::function<void(double)> observer) const;
};

struct ActivationFn {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  Tensor operator()(const Tensor& x) const { return fn(x); }
};
extern const ActivationFn identity, relu, tanh, sigmoid, gelu, elu, leaky_relu, softplus, softmax, log_softmax;
// The named activation; throws ValueError listing the known names.
const ActivationFn& activation_by_name(const std::string& name);

struct LinearOptions {
  bool bias = true;
  Init weight_init = Init::glorot_uniform();
  Init bias_init = Init::zeros();
  // Use another layer's weights (tied embeddings); with transpose_weights the shared matrix is
  // read as (n_units, in) and transposed.
  std::optional<Tensor> shared_weights;
  bool transpose_weights = false;
};

class Linear : public Layer {
 public:
  Linear(const Layer& input, int64_t n_units, LinearOptions options = {}, const std::string& name = "");
  explicit Linear(int64_t n_units, LinearOptions options = {}, const std::string& name = "");  // bound by its first call
};

class Activation : public Layer {
 public:
  Activation(const Layer& input, ActivationFn fn, const std::string& name = "");
  explicit Activation(ActivationFn fn, const std::string& name = "");  // bound by its first call
};

class Dropout : public Layer {
 public:
  // Inverted dropout: in Train mode zeroes each element with `probability` and scales the rest
  // by 1 / (1 - probability); the identity in Eval mode. Seeded per layer.
  Dropout(const Layer& input, double probability, uint64_t seed = 0, const std::string& name = "");
  explicit Dropout(double probability, uint64_t seed = 0, const std::string& name = "");  // bound by its first call
  // With a Param, the probability can change while training.
  Dropout(const Layer& input, const Param& probability, uint64_t seed = 0, const std::string& name = "");
};

// How Merge combines its inputs (TensorGraph's merge modes).
enum class MergeMode : uint8_t { Sum, Subtract, Multiply, Mean, Concat };

// Combines several layers with a merge mode; Concat joins them along `axis`.
class Merge : public Layer {
 public:
  Merge(const std::vector<Layer>& inputs, MergeMode mode, int64_t axis = -1, const std::string& name = "");
};

// Merges of several layers of one shape (Mean/Add/... with broadcasting), as in TensorGraph.
class Add : public Layer {
 public:
  explicit Add(const std::vector<Layer>& inputs, const std::string& name = "");
  Add(const Layer& a, const Layer& b, const std::string& name = "") : Add(std::vector<Layer>{a, b}, name) {}
};
class Subtract : public Layer {
 public:
  Subtract(const Layer& a, const Layer& b, const std::string& name = "");
};
class Multiply : public Layer {
 public:
  explicit Multiply(const std::vector<Layer>& inputs, const std::string& name = "");
  Multiply(const Layer& a, const Layer& b, const std::string& name = "") : Multiply(std::vector<Layer>{a, b}, name) {}
};
class Concat : public Layer {
 public:
  explicit Concat(const std::vector<Layer>& inputs, int64_t axis = -1, const std::string& name = "");
};
class Mean : public Layer {
 public:
  explicit Mean(const std::vector<Layer>& inputs, const std::string& name = "");
};

// A Lambda's tensors, declared by name: parameters (trained: requires_grad is set on them) and
// buffers (saved, not trained). Each becomes part of the layer's State.
struct LambdaState {
  std::vector<std::pair<std::string, Tensor>> params, buffers;
};
// A Lambda's function of its input tensors and its state (read tensors with state.param(name) /
// state.buffer(name): the values loaded or copied into the state are the ones used).
using LambdaFn = std::function<Tensor(const std::vector<Tensor>& inputs, State& state)>;

// Any tensor function as a layer; `shape` is its output shape (-1 for dynamic dims).
class Lambda : public Layer {
 public:
  // Tensors the function captures are invisible to the layer: not in Graph::parameters(), not
  // saved. Such a Lambda cannot be saved (its kind is "Lambda").
  Lambda(const std::vector<Layer>& inputs, std::function<Tensor(const std::vector<Tensor>&)> fn, Shape shape,
         DType dtype = Float32, const std::string& name = "");
  // With declared tensors, in the layer's state: Graph::parameters() collects the parameters,
  // optimizers train them, reuse_with shares them. A function cannot be written to a file, so
  // such a Lambda is saved under `kind` (its shape, dtype and the declared tensors' names, shapes
  // and dtypes; save_model writes the values) once `kind` is registered with
  // register_lambda_kind(kind, fn), which loading needs too. With kind "Lambda" it is not saved.
  Lambda(const std::vector<Layer>& inputs, LambdaFn fn, Shape shape, LambdaState state, const std::string& kind = "Lambda",
         DType dtype = Float32, const std::string& name = "");
};

// Registers `kind` (nn/registry.h) for Lambdas made with it: saving writes them, and loading
// rebuilds each with `fn`, its saved shape, dtype and declared tensors (their values then come
// from the file). Loading a file with an unregistered kind throws ValueError naming the layer.
void register_lambda_kind(const std::string& kind, LambdaFn fn);

// Arithmetic on layers makes merge / lambda layers.
Layer operator+(const Layer& a, const Layer& b);
Layer operator-(const Layer& a, const Layer& b);
Layer operator*(const Layer& a, const Layer& b);
Layer operator*(const Layer& a, double s);
Layer operator*(double s, const Layer& a);
Layer operator+(const Layer& a, double s);

}  // namespace loom::nn
