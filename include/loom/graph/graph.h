#pragma once
// Graph::build traces a layer graph back from its outputs, orders it by dependency and
// validates it; as_function() and compile() turn it into a callable plan.
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/memory.h"
#include "loom/nn/layer.h"

namespace loom {

class Plan;
struct CompileOptions;
struct GraphAccess;  // src/graph: the evaluator's access to a graph's internals
struct Compilation;  // src/graph: the compiler's passes over a plan being built

class LOOM_API Graph {
 public:
  // Traces from `outputs` back through each layer's inputs, stopping at the layers in
  // `inputs` (which need not be Input layers: that selects the path between chosen start and
  // end layers). With no `inputs`, every Input reached is an input. Throws ValueError naming the
  // layers for: a cycle; an output that depends on an Input neither given nor holding a value;
  // a given input that reaches no output; two layers with one name (names identify layers in
  // saved files and in layer(name)).
  static Graph build(const std::vector<nn::Layer>& outputs, const std::vector<nn::Layer>& inputs = {});
  // One output without braces: Graph::build(out, {x}) is Graph::build({out}, {x}).
  static Graph build(const nn::Layer& output, const std::vector<nn::Layer>& inputs = {}) {
    return build(std::vector<nn::Layer>{output}, inputs);
  }

  const std::vector<nn::Layer>& nodes() const { return nodes_; }  // dependency order
  const std::vector<nn::Layer>& inputs() const { return inputs_; }
  const std::vector<nn::Layer>& outputs() const { return outputs_; }
  // Edges as (from, to) node positions.
  std::vector<std::pair<size_t, size_t>> edges() const;
  // The layer named `name`; ValueError listing the graph's layer names when there is none.
  const nn::Layer& layer(const std::string& name) const;
  // Every trainable tensor of the graph's layers (inner Module layers included), each once,
  // in node order: what an optimizer trains.
  std::vector<Tensor> parameters() const;
  // A Keras-like table: one row per layer (name, kind, output shape, parameter count, the
  // layer it shares state with), then the total and trainable parameter counts. Shared
  // parameters count once.
  std::string summary() const;

  // A function of the input tensors (positionally, as `inputs`) returning the outputs. It runs
  // the ordered plan without re-tracing and frees each intermediate after its last consumer.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> as_function() const;
  // The optimized static plan (docs/compile.md): dead nodes removed, common subexpressions
  // merged, constant subgraphs folded, intermediates freed after their last consumer. With
  // input shapes (one per input, -1 keeps a dimension open) the plan is specialized to them:
  // shapes are checked per node at compile time and peak_bytes() is known.
  Plan compile() const;
  Plan compile(const std::vector<Shape>& input_shapes) const;
  Plan compile(const CompileOptions& options) const;

  // Graphviz DOT text: one node per layer with kind, name and shape; layers that share state
  // are drawn in the same colour and joined by a dashed "shared" edge.
  std::string to_dot() const;

 private:
  std::vector<nn::Layer> nodes_, inputs_, outputs_;
  std::vector<std::vector<size_t>> args_;  // per node: positions of its inputs in nodes_
  friend class Plan;
  friend struct GraphAccess;
};

// The summary() table.
LOOM_API std::ostream& operator<<(std::ostream& os, const Graph& graph);

struct LOOM_API CompileOptions {
  // One shape per graph input (empty: the inputs' declared shapes, -1 dims open at run time).
  std::vector<Shape> input_shapes;
  // The passes (docs/compile.md); each can be turned off to compare or debug.
  bool remove_dead_nodes = true;
  bool eliminate_common_subexpressions = true;
  bool fold_constants = true;
  // In Eval mode: a Conv2D with the BatchNorm, residual Add and ReLU that follow it (each
  // optional, each read by nothing else) runs as one convolution with batch norm folded into its
  // weights and the rest as oneDNN post-ops. Results differ from the unfused ops by float32
  // rounding (docs/compile.md).
  bool fuse_conv_epilogues = true;
  // With fuse_conv_epilogues, in Eval mode without gradients: a fused convolution's output read
  // only by other fused convolutions stays in oneDNN's blocked layout (nChw8c on AVX2) between
  // them, converted to NCHW only where a plain reader or an output needs it (docs/compile.md).
  bool blocked_layouts = true;
  // Any mode: a chain of Add / Subtract / Multiply (two operands) and relu / sigmoid / tanh
  // Activation layers, each read by nothing but the next, runs as one pass over its operands
  // (relu(a * b + c): one read of a, b, c and one write) when no gradient is needed and the
  // operands are float32, contiguous and of one shape; op by op otherwise. Bit for bit the
  // unfused result (the same vector kernels, block by block).
  bool fuse_elementwise = true;
  // A run without gradients (inference) computes its float32 products batch-invariantly: a row's
  // outputs have the same bits whatever rows ran with it (a server's batch, predict's
  // batch_size), at a cost measured in docs/kernels.md ("Batch-invariant products"). Off: the
  // faster oneDNN GEMM, whose rounding of a row depends on the batch. Runs with gradients never
  // take it (include/loom/core/batch_invariance.h).
  bool batch_invariant = true;
};

// The one evaluator of layer graphs: Layer::operator()(), Module, as_function and train::Model
// all run Plans. run() is const and keeps activations in the call, so one plan may run on
// several threads at once.
class LOOM_API Plan {
 public:
  explicit Plan(Graph graph, const CompileOptions& options = {});
  // The outputs for `inputs` given positionally (as graph().inputs()); with no tensors, each
  // graph input that is an Input layer is read for its current value (Input::set_value or its
  // default; ValueError naming the Input when it holds none). A tensor of the wrong shape or
  // dtype throws ShapeError/DTypeError naming the input.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs = {}) const;
  // Single-output convenience: fn(), fn(x), fn(x1, x2).
  template <typename... Ts>
  Tensor operator()(const Ts&... xs) const {
    return single(run(std::vector<Tensor>{xs...}));
  }
  const Graph& graph() const;
  // The shapes the plan was compiled for, one per input (-1: open at run time).
  const std::vector<Shape>& input_shapes() const;
  // The compiled shape of each output, from the input shapes by the layer kinds' shape rules
  // (-1: sized at run time).
  std::vector<Shape> output_shapes() const;
  // True when some input dimension is open (-1): the plan runs any size there (any batch).
  bool shape_polymorphic() const;
  // Bytes of activations live at once at the plan's peak (graph inputs, every node's outputs
  // until their last consumer, the outputs), from liveness and the compiled shapes; -1 when
  // some shape is open. Op-internal temporaries and folded constants are not counted.
  int64_t peak_bytes() const;
  // The memory plan of its inference runs (no gradient recorded): the first runs as usual, the
  // second records its blocks, later runs take them from one buffer laid out by their lifetimes
  // (StepArena, loom/core/memory.h). Shared by copies of the plan; a run on another thread
  // while one holds it, or inside a training step (which plans its own), goes without.
  StepArena::Stats memory_plan() const;
  // The optimized plan as text: each step with kind, name and shape and what it frees, what each
  // pass removed, merged or folded, and the peak bytes.
  std::string dump() const;

 private:
  friend struct Compilation;
  struct Impl;
  static Tensor single(std::vector<Tensor> outs);
  std::vector<Tensor> execute(const std::vector<Tensor>& inputs) const;
  std::shared_ptr<const Impl> impl_;
};

namespace nn {
LOOM_API int64_t sync_batch_norm(const std::vector<Layer>& layers, bool sync);  // loom/nn/normalization.h
// Makes every BatchNorm layer of `graph` synchronized (or not): returns how many there are.
inline int64_t sync_batch_norm(const Graph& graph, bool sync = true) { return sync_batch_norm(graph.nodes(), sync); }
}  // namespace nn

// The dump() text.
LOOM_API std::ostream& operator<<(std::ostream& os, const Plan& plan);

}  // namespace loom
