#pragma once
// The graph compiler's state between its passes (src/graph/passes/, docs/compile.md). Plan's
// constructor (plan.cpp) is a driver: it makes a Compilation and runs each pass on it in order;
// each pass reads what earlier ones decided and writes its own part.
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "graph/plan_internal.h"
#include "loom/autograd/custom_op.h"
#include "loom/graph/graph.h"
#include "loom/nn/activation.h"
#include "loom/nn/conv.h"
#include "loom/nn/merge.h"
#include "loom/nn/normalization.h"
#include "loom/nn/pooling.h"
#include "loom/ops/conv.h"
#include "ops/fused_elementwise.h"

namespace loom {

// The options of a fused convolution group's layers, read at compile time (not per run).
struct FusedGeometry {
  std::vector<int64_t> stride, dilation;
  ConvPadding padding = 0;
  int64_t groups = 1;
  bool conv_bias = false, bn_affine = false;
  double bn_eps = 1e-5;
};

// What a step runs: one alternative per decision the passes make, each holding what it needs
// (docs/compile.md). The schedule makes every step a LayerStep or MultiOutputStep; the fusion
// passes turn steps into the others. Plan::execute runs the alternative it finds.
// Runs its layer (LayerImpl::compute).
struct LayerStep {};
// Runs its layer of several outputs (a Module's; compute_outputs): its slot holds the first.
struct MultiOutputStep {};
// A Conv2D (float32) with its epilogue (conv epilogues): in Eval mode the group as one
// convolution (ops/conv_fused.h) writing slot `out`, the last member's; in Train mode the
// convolution alone, each member then running at its own step (ConvMemberStep).
struct ConvGroupStep {
  size_t out = SIZE_MAX, bn = SIZE_MAX, residual = SIZE_MAX;  // slots; SIZE_MAX: no such member
  bool relu = false;
  // Eval, no gradients: the output may stay in the backend's blocked layout (every reader is a
  // fused convolution: blocked layouts); whether it does is decided per run from the shapes
  bool keep_blocked = false;
  // the residual is read by nothing after this step: its buffer may take the output (in place)
  bool residual_dies = false;
  FusedGeometry geometry;  // read from the layers' options once
};
// A BatchNorm, Add or ReLU of a ConvGroupStep's group: done by the group in Eval mode; runs its
// layer in Train mode.
struct ConvMemberStep {};
// A MaxPool2D (float32) read only by fused convolutions (blocked layouts): pools in the blocked
// layout when its input holds it (Eval, no gradients), its output then blocked; else its layer.
struct BlockedPoolStep {
  std::vector<int64_t> kernel, stride, padding;
  bool ceil = false;
};
// The last link of an elementwise chain (elementwise chains): runs the whole chain in one pass
// over the slots `inputs` (ops/fused_elementwise.h), with gradients as one recorded node whose
// backward is the links' (chain_gradient.cpp). Operands the pass cannot take at run time (a
// broadcast, a strided view) run the links' layers one by one, the steps `links` (this one last).
struct ChainStep {
  std::shared_ptr<const detail::ElementwiseChain> chain;
  std::shared_ptr<const CustomOp> differentiable;  // the chain with its gradient
  std::vector<size_t> inputs, links;
};
// A link of an elementwise chain before its last: done by the chain's step.
struct ChainedStep {};

using StepAction = std::variant<LayerStep, MultiOutputStep, ConvGroupStep, ConvMemberStep, BlockedPoolStep, ChainStep, ChainedStep>;

struct Plan::Impl {
  struct Step {
    size_t node = 0;
    std::vector<size_t> args;   // value slots (node positions) it reads
    std::vector<size_t> frees;  // slots released after it
    StepAction action;          // what it runs
    template <class A>
    bool is() const { return std::holds_alternative<A>(action); }
    template <class A>
    A* as() { return std::get_if<A>(&action); }
    template <class A>
    const A* as() const { return std::get_if<A>(&action); }
  };
  std::shared_ptr<const Graph> graph;
  std::vector<Shape> input_shapes;               // compiled, one per graph input
  std::vector<std::vector<Shape>> shapes;        // compiled output shape(s) per node; -1 open
  std::vector<size_t> input_pos, output_pos;     // slots of the inputs and outputs
  std::vector<Step> steps;
  std::vector<std::pair<size_t, std::vector<Tensor>>> constants;  // folded nodes: slot, outputs
  // what each pass did, in order, for dump(): its name, whether it ran, and one line per change
  struct PassRecord {
    std::string name;
    bool ran = false;
    std::vector<std::string> changes;
  };
  std::vector<PassRecord> passes;
  bool specialized = false;                      // compiled for given input shapes
  bool batch_invariant = true;                   // CompileOptions::batch_invariant
  bool has_multi = false;                        // some node has several outputs
  int64_t peak = -1;
  std::string peak_at;
  std::unique_ptr<StepArena> arena = std::make_unique<StepArena>();  // inference runs' memory plan
};

// What the passes share while a plan is compiled.
struct Compilation {
  using Impl = Plan::Impl;
  using Step = Plan::Impl::Step;
  Compilation(Impl& plan, const CompileOptions& options);
  Impl& p;
  const CompileOptions& opt;
  const Graph& g;
  const std::vector<nn::Layer>& nodes;
  const std::vector<std::vector<size_t>>& args;  // the node positions each node reads
  size_t n = 0;
  std::unordered_map<const nn::LayerImpl*, size_t> pos;
  std::vector<bool> is_input;
  std::vector<std::vector<Shape>> declared;  // every node's declared output shape(s)
  // fold: nodes with a constant value, those computed here, and their values
  std::vector<bool> constant, folded;
  std::vector<std::vector<Tensor>> const_value;
  // merge: the node each node's value is read from (itself unless merged)
  std::vector<size_t> alias;
  // dead: what some output reaches
  std::vector<bool> live;
  // schedule: who reads each slot, each node's step, the graph outputs' slots
  std::vector<size_t> readers, step_of;
  std::vector<bool> is_out;

  // the output of its argument node k reads (a ModuleOutput reads one of a Module's several)
  size_t pick(size_t k) const { return nodes[k].impl()->reads_output(); }
  // records a change of the running pass (or of the earlier pass `pass`) for dump()
  void note(std::string change, const char* pass = nullptr) {
    for (size_t i = p.passes.size(); i-- > 0;)
      if (!pass || p.passes[i].name == pass) return p.passes[i].changes.push_back(std::move(change));
  }
};

// "Kind 'name'", as the dump and error messages name a node ("'a', 'b'" for several: names_of,
// plan_internal.h).
std::string label(const nn::Layer& l);

// The kinds the passes recognise, by their attribute types (nn/attributes.h), never by a kind's
// name or an option's key: each gives the layer's attributes, or nullptr for another kind.
const nn::ConvAttributes* conv2d_of(const nn::Layer& l);
const nn::BatchNormOptions* batch_norm_of(const nn::Layer& l);
const nn::PoolAttributes* max_pool2d_of(const nn::Layer& l);
// True for a merge layer of this mode (Add: MergeMode::Sum).
bool is_merge(const nn::Layer& l, nn::MergeMode mode);
// True for an Activation layer computing `fn` (ActivationFn::is: the function, not its name).
bool is_activation(const nn::Layer& l, const nn::ActivationFn& fn);
// A layer without inputs of its own (Input, Constant, Param): it hands out a tensor it holds.
inline bool is_source(const nn::Layer& l) { return l.inputs().empty(); }
// Bytes of a tensor of this shape, -1 when a dimension is open.
int64_t bytes_of(const Shape& s, DType dtype);
// A node's declared output dtypes (several for a Module with several outputs).
std::vector<DType> dtypes_of(const nn::Layer& l);
// True when the node has no parameters, buffers or inner states.
bool state_free(const nn::Layer& l);

// The passes, in the order the driver runs them (one file each under src/graph/passes/).
void infer_shapes(Compilation& c);              // shapes.cpp
void fold_constants(Compilation& c);            // fold.cpp
void merge_common_subexpressions(Compilation& c);  // merge.cpp
void remove_dead_nodes(Compilation& c);         // dead.cpp
void schedule_steps(Compilation& c);            // schedule.cpp
void fuse_conv_epilogues(Compilation& c);       // conv_epilogues.cpp
void keep_blocked_layouts(Compilation& c);      // blocked_layouts.cpp
void fuse_elementwise_chains(Compilation& c);   // elementwise_chains.cpp
void write_in_place(Compilation& c);            // in_place.cpp
void measure_peak_memory(Compilation& c);       // peak_memory.cpp

// The chain as one op that autograd records (chain_gradient.cpp): its forward is the one pass,
// its backward recomputes the links' values and applies each link's gradient rule.
std::shared_ptr<const CustomOp> differentiable_chain(std::shared_ptr<const detail::ElementwiseChain> chain);

}  // namespace loom
