#pragma once
// Lambda: any tensor function as a layer, with optionally declared state (LambdaState, LambdaFn)
// and register_lambda_kind to save and load it.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/api.h"
#include "loom/nn/layer.h"
#include "loom/nn/state.h"

namespace loom::nn {

// A Lambda's tensors, declared by name: parameters (trained: requires_grad is set on them) and
// buffers (saved, not trained). Each becomes part of the layer's State.
struct LOOM_API LambdaState {
  std::vector<std::pair<std::string, Tensor>> params, buffers;
};
// A Lambda's function of its input tensors and its state (read tensors with state.param(name) /
// state.buffer(name): the values loaded or copied into the state are the ones used).
using LambdaFn = std::function<Tensor(const std::vector<Tensor>& inputs, State& state)>;

// Any tensor function as a layer; `shape` is its output shape (-1 for dynamic dims). A Lambda has
// no shape rule of its own (the function is opaque): it keeps the default (LayerImpl::
// output_shapes), its declared shape with a leading -1 taking the batch of its inputs. Its other
// -1 sizes stay open at compile time, and on reuse_with, even where the inputs' sizes are known;
// running the plan gives them.
class LOOM_API Lambda : public Layer {
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
LOOM_API void register_lambda_kind(const std::string& kind, LambdaFn fn);

}  // namespace loom::nn
