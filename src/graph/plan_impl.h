#pragma once
// The graph compiler's state between its passes (src/graph/passes/, docs/compile.md). Plan's
// constructor (plan.cpp) is a driver: it makes a Compilation and runs each pass on it in order;
// each pass reads what earlier ones decided and writes its own part.
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/plan_internal.h"
#include "loom/graph/graph.h"
#include "loom/nn/activation.h"
#include "loom/nn/conv.h"
#include "loom/nn/merge.h"
#include "loom/nn/normalization.h"
#include "loom/nn/pooling.h"
#include "loom/ops/conv.h"
#include "ops/fused_elementwise.h"

namespace loom {

// The options of a fused group's layers, read at compile time (not per run).
struct FusedGeometry {
  std::vector<int64_t> stride, dilation;
  ConvPadding padding = 0;
  int64_t groups = 1;
  bool conv_bias = false, bn_affine = false;
  double bn_eps = 1e-5;
};

struct Plan::Impl {
  struct Step {
    size_t node = 0;
    std::vector<size_t> args;   // value slots (node positions) it reads
    std::vector<size_t> frees;  // slots released after it
    // Eval mode: this Conv2D step computes the fused group ending in slot `fused_out`
    // (SIZE_MAX: none); a step with `fused_away` set is done by such a step and only frees
    size_t fused_out = SIZE_MAX, bn = SIZE_MAX, residual = SIZE_MAX;
    bool relu = false, fused_away = false;
    // the fused group's output may stay in the backend's blocked layout (every reader is a
    // fused convolution; conv_fused.h): decided per run from the shapes, when no gradient is on
    bool keep_blocked = false;
    // the residual is read by nothing after this step: its buffer may take the output
    bool residual_dies = false;
    // Eval, no gradients: this MaxPool2D (read only by fused convolutions) runs in the blocked
    // layout when its input holds it, and its output then stays blocked
    bool pool_blocked = false;
    std::vector<int64_t> pool_kernel, pool_stride, pool_padding;
    bool pool_ceil = false;
    std::shared_ptr<const FusedGeometry> geometry;  // read from the layers' options once
    // Any mode: this step ends an elementwise chain of the steps `chain_steps` (this one last),
    // run in one pass (ops/fused_elementwise.h) over the slots `chain_inputs`; the chain's other
    // steps have `chained_away` set and are done here.
    std::shared_ptr<const detail::ElementwiseChain> chain;
    std::vector<size_t> chain_inputs, chain_steps;
    bool chained_away = false;
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

// "Kind 'name'", as the dump and error messages name a node; "'a', 'b'" for several.
std::string label(const nn::Layer& l);
std::string names_of(const std::vector<nn::Layer>& layers);

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

}  // namespace loom
