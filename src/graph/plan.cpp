// The graph compiler's driver and the one evaluator of layer graphs (docs/compile.md). Plan's
// constructor runs the passes (src/graph/passes/, one file each) over a built Graph in order;
// run() replays the steps they leave.
#include "loom/graph/graph.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <ostream>
#include <set>
#include <utility>

#include "graph/plan_impl.h"
#include "loom/core/batch_invariance.h"
#include "loom/core/grad_mode.h"
#include "loom/graph/module.h"
#include "loom/nn/dropout.h"
#include "ops/conv_fused.h"

namespace loom {

using nn::Layer;
using nn::LayerImpl;

// The C++ constant naming a dtype (Float32, UInt8, ...), for messages that show the fix.
static const char* dtype_constant(DType d) {
  switch (d) {
    case DType::Bool: return "Bool";
    case DType::UInt8: return "UInt8";
    case DType::Int32: return "Int32";
    case DType::Int64: return "Int64";
    case DType::Float16: return "Float16";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float32";
    case DType::Float64: return "Float64";
  }
  return "?";
}

std::string label(const Layer& l) { return std::string(l.kind()) + " '" + l.name() + "'"; }

const nn::ConvAttributes* conv2d_of(const Layer& l) {
  const auto* a = nn::attributes_of<nn::ConvAttributes>(l);
  return a && a->kernel_size.size() == 2 ? a : nullptr;
}
const nn::BatchNormOptions* batch_norm_of(const Layer& l) { return nn::attributes_of<nn::BatchNormOptions>(l); }
const nn::PoolAttributes* max_pool2d_of(const Layer& l) {
  const auto* a = nn::attributes_of<nn::PoolAttributes>(l);
  return a && a->max ? a : nullptr;
}
bool is_merge(const Layer& l, nn::MergeMode mode) {
  const auto* a = nn::attributes_of<nn::MergeAttributes>(l);
  return a && a->mode == mode;
}
bool is_activation(const Layer& l, const nn::ActivationFn& fn) {
  const auto* a = nn::attributes_of<nn::ActivationAttributes>(l);
  return a && a->fn.is(fn);
}

std::string names_of(const std::vector<Layer>& ls) {
  std::string names;
  for (const Layer& i : ls) names += (names.empty() ? "'" : ", '") + i.name() + "'";
  return names;
}

int64_t bytes_of(const Shape& s, DType dtype) {
  int64_t n = static_cast<int64_t>(itemsize(dtype));
  for (int64_t d : s) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

std::vector<DType> dtypes_of(const Layer& l) {
  const Graph* inner = nn::module_graph(l);
  if (!inner || inner->outputs().size() < 2) return {l.dtype()};
  std::vector<DType> out;
  for (const Layer& o : inner->outputs()) out.push_back(o.dtype());
  return out;
}

bool state_free(const Layer& l) {
  const nn::State& s = l.state();
  return s.params().empty() && s.buffers().empty() && s.children().empty();
}

namespace {

// declared output shapes of a node (several for a Module with several outputs)
std::vector<Shape> declared_shapes(const Layer& l) {
  const Graph* inner = nn::module_graph(l);
  if (!inner || inner->outputs().size() < 2) return {l.shape()};
  std::vector<Shape> out;
  for (const Layer& o : inner->outputs()) {
    Shape s = o.shape();
    if (!s.empty() && !l.shape().empty()) s[0] = l.shape()[0];  // the batch follows reuse_with
    out.push_back(s);
  }
  return out;
}

// A Conv2D step and its fused epilogue as one convolution. `blocked` (empty: blocked layouts
// off for this run) says which slots hold the blocked layout; x is read in its layout, the
// residual converted to the output's, and the output's is recorded.
Tensor run_fused(const std::vector<Layer>& nodes, size_t conv, const ConvGroupStep& s, const Tensor& x, size_t x_slot,
                 std::vector<Tensor>& values, std::vector<char>& blocked) {
  const FusedGeometry& geo = s.geometry;
  nn::State& cs = nodes[conv].state();
  detail::FusedConv e;
  if (s.bn != SIZE_MAX) {
    nn::State& bs = nodes[s.bn].state();
    if (geo.bn_affine) e.bn_weight = bs.param("weight"), e.bn_bias = bs.param("bias");
    e.bn_mean = bs.buffer("running_mean");
    e.bn_var = bs.buffer("running_var");
    e.bn_eps = geo.bn_eps;
  }
  e.relu = s.relu;
  const Tensor& w = cs.param("weights");
  // a blocked residual for an NCHW output: computed blocked and converted once, after (rather
  // than the residual converted here, into the primitive's layout and the output back)
  const bool res_blocked = !blocked.empty() && s.residual != SIZE_MAX && blocked[s.residual];
  if (!blocked.empty()) {
    e.x_blocked = blocked[x_slot];
    if (s.keep_blocked || res_blocked)
      e.out_blocked = detail::conv2d_fused_blocked(x, w, geo.stride, geo.padding, geo.dilation, geo.groups) > 0;
    blocked[s.out] = e.out_blocked && s.keep_blocked;
  }
  if (s.residual != SIZE_MAX) {
    e.residual = s.residual_dies ? std::move(values[s.residual]) : values[s.residual];
    if (res_blocked != e.out_blocked) e.residual = detail::reorder_blocked(e.residual, res_blocked);
    e.write_into_residual = s.residual_dies;
  }
  const Tensor bias = geo.conv_bias ? cs.param("bias") : Tensor();
  const Tensor y = detail::conv2d_fused(x, w, bias, e, geo.stride, geo.padding, geo.dilation, geo.groups);
  return e.out_blocked && !s.keep_blocked ? detail::reorder_blocked(y, true) : y;
}

}  // namespace

Compilation::Compilation(Plan::Impl& plan, const CompileOptions& options)
    : p(plan), opt(options), g(*plan.graph), nodes(g.nodes()), args(GraphAccess::args(g)), n(nodes.size()) {
  for (size_t k = 0; k < n; ++k) pos[nodes[k].impl().get()] = k;
  is_input.assign(n, false);
  for (const Layer& i : g.inputs()) {
    p.input_pos.push_back(pos.at(i.impl().get()));
    is_input[p.input_pos.back()] = true;
  }
  declared.resize(n);
  for (size_t k = 0; k < n; ++k) declared[k] = declared_shapes(nodes[k]);
  constant.assign(n, false);
  folded.assign(n, false);
  const_value.resize(n);
  alias.resize(n);
  std::iota(alias.begin(), alias.end(), size_t{0});
}

Plan::Plan(Graph graph, const CompileOptions& opt) {
  auto p = std::make_shared<Impl>();
  p->graph = std::make_shared<const Graph>(std::move(graph));
  p->batch_invariant = opt.batch_invariant;
  Compilation c(*p, opt);
  // each pass in order; one turned off in CompileOptions is listed as off in the dump
  auto pass = [&](const char* name, void (*run)(Compilation&), bool on) {
    p->passes.push_back({name, on, {}});
    if (on) run(c);
  };
  pass("shapes", infer_shapes, true);
  pass("fold", fold_constants, opt.fold_constants);
  pass("merge", merge_common_subexpressions, opt.eliminate_common_subexpressions);
  pass("dead", remove_dead_nodes, true);  // off: every node is live; it still keeps the folded constants
  p->passes.back().ran = opt.remove_dead_nodes;
  pass("schedule", schedule_steps, true);
  pass("conv epilogues", fuse_conv_epilogues, opt.fuse_conv_epilogues);
  pass("blocked layouts", keep_blocked_layouts, opt.fuse_conv_epilogues && opt.blocked_layouts);
  pass("elementwise chains", fuse_elementwise_chains, opt.fuse_elementwise);
  pass("in place", write_in_place, true);
  pass("peak memory", measure_peak_memory, true);
  impl_ = std::move(p);
}

const Graph& Plan::graph() const { return *impl_->graph; }
const std::vector<Shape>& Plan::input_shapes() const { return impl_->input_shapes; }
std::vector<Shape> Plan::output_shapes() const {
  std::vector<Shape> out;
  for (size_t i = 0; i < impl_->output_pos.size(); ++i) {
    const std::vector<Shape>& s = impl_->shapes[impl_->output_pos[i]];
    out.push_back(s.at(0));  // a node with several outputs as a graph output gives its first
  }
  return out;
}
bool Plan::shape_polymorphic() const {
  for (const Shape& s : impl_->input_shapes)
    for (int64_t d : s)
      if (d < 0) return true;
  return false;
}
int64_t Plan::peak_bytes() const { return impl_->peak; }

StepArena::Stats Plan::memory_plan() const { return impl_->arena->stats(); }

// Issue 36, silent trap 2: the mode is Eval unless a ModeScope says Train, so a hand-written
// training loop that forgets the scope trains with dropout off and batch norm frozen. A
// forward pass in Eval mode whose output records gradients, through such a layer, is that
// loop (an evaluation runs under NoGrad, as Model::evaluate and predict do): said once per
// layer on stderr, with the fix.
static void warn_eval_mode_gradients(const std::vector<Layer>& nodes, const std::vector<Tensor>& outs) {
  if (std::none_of(outs.begin(), outs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); })) return;
  static std::mutex mutex;
  static std::set<std::string> warned;
  for (const Layer& l : nodes) {
    // by the kinds' typed attributes, as the compiler's fusions match them, not by name
    const bool dropout = nn::attributes_of<nn::DropoutAttributes>(l) != nullptr;
    if (!dropout && !batch_norm_of(l)) continue;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!warned.insert(label(l)).second) continue;
    }
    std::fprintf(stderr,
                 "loom: warning: %s ran in Eval mode (%s) in a forward pass that records gradients. A training loop "
                 "outside train::Model::fit needs `nn::ModeScope train(nn::Mode::Train);` around its forward pass; an "
                 "evaluation should run under `NoGrad` (which also silences this). Said once per layer.\n",
                 label(l).c_str(), dropout ? "dropout off" : "running statistics used and not updated");
  }
}

std::vector<Tensor> Plan::run(const std::vector<Tensor>& xs) const {
  // With gradients recorded most blocks outlive the run (autograd keeps them for backward), and
  // a training step plans the forward and backward together in its own arena.
  if (grad_enabled()) return execute(xs);
  // An inference run: its products are batch-invariant, so a row's outputs do not depend on the
  // rows run with it (a server's batch, predict's batch_size; docs/kernels.md).
  BatchInvariantScope invariant(impl_->batch_invariant);
  StepArena::Scope planned(*impl_->arena, StepArena::if_free);
  return execute(xs);
}

namespace {

// The tensor graph input i takes: the one given, else an Input layer's value; checked against
// the compiled shape and the input's dtype.
Tensor input_value(const Compilation::Impl& p, const std::vector<Tensor>& xs, size_t i, nn::Mode mode) {
  const std::vector<Layer>& ins = p.graph->inputs();
  const Layer& l = ins[i];
  Tensor x;
  if (!xs.empty()) {
    x = xs[i];
  } else if (is_source(l)) {
    x = l.impl()->compute({}, mode);  // an Input's value or default; ValueError naming it otherwise
  } else {
    throw ValueError("Plan: graph input " + std::to_string(i) + " (" + label(l) +
                     ") is not an Input layer (it has inputs of its own), so it holds no value to read: pass the input tensors (" + names_of(ins) + ")");
  }
  const Shape& want = p.input_shapes[i];
  if (!x.defined() || !shape_matches(want, x.shape()))
    throw ShapeError("Plan: input " + std::to_string(i) + " ('" + l.name() + "') expects shape " + shape_str(want) +
                     (p.specialized ? " (compiled for it; -1: any size)" : " (-1: any size)") + ", got " +
                     (x.defined() ? shape_str(x.shape()) : "an undefined tensor"));
  // as Input::set_value: no silent promotion (int64 into a float32 graph would run in float64)
  if (x.dtype() != l.dtype())
    throw DTypeError("Plan: input " + std::to_string(i) + " ('" + l.name() + "') expects dtype " + dtype_name(l.dtype()) +
                     ", got " + dtype_name(x.dtype()) + " (convert it with x.astype(" + dtype_constant(l.dtype()) +
                     "), or create it with that dtype: tensor({...}, " + dtype_constant(l.dtype()) +
                     "); C++ floating literals such as tensor({1.0, 2.0}) make float64, as NumPy)");
  return x;
}

// True when recording is on and some tensor requires grad.
bool records_gradients(const std::vector<Tensor>& ts) {
  return grad_enabled() && std::any_of(ts.begin(), ts.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

// Operands an elementwise chain's differentiable node takes: float32 of one shape (a strided
// one is read link by link inside it; a broadcast would give its gradients the wrong shape).
bool chain_operands_fit(const std::vector<Tensor>& ts) {
  return std::all_of(ts.begin(), ts.end(), [&](const Tensor& t) {
    return t.defined() && t.dtype() == DType::Float32 && t.shape() == ts[0].shape() && t.device() == ts[0].device();
  });
}

// One run of a plan: every slot's value, the values of nodes with several outputs, and which
// slots hold the convolutions' blocked layout. Each step's action runs through an overload of
// `run`, which returns the slot the step produced (SIZE_MAX: none, the step was done by another).
struct PlanRun {
  using Step = Compilation::Step;
  const Compilation::Impl& p;
  const std::vector<Layer>& nodes;
  const nn::Mode mode;
  const bool eval;  // fused convolution groups run in Eval mode only (Train-mode batch norm uses the batch's statistics)
  std::vector<Tensor> values;
  std::vector<std::vector<Tensor>> multi;  // every output of a node with several
  std::vector<char> blocked;               // slots in the blocked layout (Eval, no gradients)
  std::vector<Tensor> argv;                // the running step's arguments (kept: no allocation per step)

  PlanRun(const Compilation::Impl& plan, nn::Mode m)
      : p(plan), nodes(plan.graph->nodes()), mode(m), eval(m == nn::Mode::Eval), values(nodes.size()),
        multi(plan.has_multi ? nodes.size() : 0), blocked(eval && !grad_enabled() ? nodes.size() : 0, 0) {}

  // the step's arguments (a ModuleOutput reads one of its Module's outputs)
  const std::vector<Tensor>& args(const Step& s) {
    argv.clear();
    const size_t pick = nodes[s.node].impl()->reads_output();
    for (size_t k : s.args) argv.push_back(pick && p.has_multi && !multi[k].empty() ? multi[k].at(pick) : values[k]);
    return argv;
  }
  size_t run(const Step& s, const LayerStep&) {
    values[s.node] = nodes[s.node].impl()->compute(args(s), mode);
    return s.node;
  }
  size_t run(const Step& s, const MultiOutputStep&) {
    multi[s.node] = nodes[s.node].impl()->compute_outputs(args(s), mode);
    values[s.node] = multi[s.node].at(0);
    return s.node;
  }
  size_t run(const Step& s, const ConvGroupStep& g) {
    if (!eval) return run(s, LayerStep{});
    values[g.out] = run_fused(nodes, s.node, g, args(s)[0], s.args[0], values, blocked);
    return g.out;
  }
  size_t run(const Step& s, const ConvMemberStep&) { return eval ? SIZE_MAX : run(s, LayerStep{}); }
  size_t run(const Step& s, const BlockedPoolStep& b) {
    if (blocked.empty() || !blocked[s.args[0]]) return run(s, LayerStep{});
    values[s.node] = detail::max_pool2d_blocked(args(s)[0], b.kernel, b.stride, b.padding, b.ceil);
    blocked[s.node] = 1;
    return s.node;
  }
  size_t run(const Step& s, const ChainStep& c) {
    std::vector<Tensor> operands;
    for (size_t a : c.inputs) operands.push_back(values[a]);
    if (!records_gradients(operands)) values[s.node] = detail::elementwise_chain(*c.chain, operands);
    else if (chain_operands_fit(operands)) values[s.node] = (*c.differentiable)(operands)[0];
    else values[s.node] = Tensor();
    if (!values[s.node].defined())  // operands the one pass cannot take (a broadcast, a strided view): link by link
      for (size_t k : c.links) run(p.steps[k], LayerStep{});
    return s.node;
  }
  size_t run(const Step&, const ChainedStep&) { return SIZE_MAX; }

  // a specialized plan checks each step's result against its compiled shape
  void check_shape(size_t k) const {
    const Shape& want = p.shapes[k][0];
    const Shape& got = values[k].shape();
    if (!shape_matches(want, got))
      throw ShapeError("Plan: " + label(nodes[k]) + " produced shape " + shape_str(got) + " but the plan was compiled for " +
                       shape_str(want) + " (compile without input shapes for a graph whose sizes vary otherwise)");
  }
  // after a step: its arguments and the values nothing reads later
  void release(const std::vector<size_t>& frees) {
    argv.clear();
    for (size_t f : frees) {
      values[f] = Tensor();
      if (p.has_multi) multi[f].clear();
    }
  }
};

}  // namespace

std::vector<Tensor> Plan::execute(const std::vector<Tensor>& xs) const {
  const Impl& p = *impl_;
  const std::vector<Layer>& ins = p.graph->inputs();
  if (!xs.empty() && xs.size() != ins.size()) {
    std::string names;
    for (const Layer& i : ins) names += (names.empty() ? "" : ", ") + i.name();
    throw ValueError("Plan: got " + std::to_string(xs.size()) + " input tensors for " + std::to_string(ins.size()) +
                     " graph inputs (" + names + "); pass all of them, or none to read the Input layers' values");
  }
  PlanRun run(p, nn::current_mode());
  for (size_t i = 0; i < ins.size(); ++i) run.values[p.input_pos[i]] = input_value(p, xs, i, run.mode);
  for (const auto& [k, outs] : p.constants) {
    run.values[k] = outs[0];
    if (p.has_multi && outs.size() > 1) run.multi[k] = outs;
  }
  for (const Impl::Step& s : p.steps) {
    const size_t produced = std::visit([&](const auto& action) { return run.run(s, action); }, s.action);
    if (p.specialized && produced != SIZE_MAX) run.check_shape(produced);
    run.release(s.frees);
  }
  std::vector<Tensor> outs;
  outs.reserve(p.output_pos.size());
  for (size_t k : p.output_pos) outs.push_back(run.values[k]);
  if (run.mode == nn::Mode::Eval && grad_enabled()) warn_eval_mode_gradients(run.nodes, outs);
  return outs;
}

Tensor Plan::single(std::vector<Tensor> outs) {
  if (outs.size() != 1)
    throw ValueError("Plan: the graph has " + std::to_string(outs.size()) + " outputs; use run() to get all of them");
  return outs[0];
}

std::string Plan::dump() const {
  const Impl& p = *impl_;
  const Graph& g = *p.graph;
  const std::vector<Layer>& nodes = g.nodes();
  std::string t = "Plan: " + std::to_string(nodes.size()) + " graph nodes; " + std::to_string(p.input_pos.size()) + " input(s), " +
                  std::to_string(p.constants.size()) + " folded constant(s), " + std::to_string(p.steps.size()) + " step(s)\n";
  t += shape_polymorphic() ? "shapes: polymorphic (-1 dimensions are sized at run time)\n"
                           : "shapes: specialized to the compiled input shapes (checked per step)\n";
  t += "passes:\n";
  for (const Impl::PassRecord& r : p.passes) {
    t += "  pass " + r.name + ":" + (!r.ran ? " off" : r.changes.empty() ? " nothing changed" : "") + "\n";
    for (const std::string& s : r.changes) t += "    " + s + "\n";
  }
  auto shapes_of = [&](size_t k) {
    std::string s;
    for (const Shape& sh : p.shapes[k]) s += (s.empty() ? "" : ", ") + shape_str(sh);
    return s;
  };
  t += "steps:\n";
  for (size_t i = 0; i < p.input_pos.size(); ++i)
    t += "  input " + std::to_string(i) + "  " + label(nodes[p.input_pos[i]]) + " " + shapes_of(p.input_pos[i]) + "\n";
  for (const auto& c : p.constants) t += "  const    " + label(nodes[c.first]) + " " + shapes_of(c.first) + "\n";
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Impl::Step& s = p.steps[i];
    t += "  " + std::to_string(i) + ": " + label(nodes[s.node]) + " " + shapes_of(s.node);
    std::string in, fr;
    for (size_t a : s.args) in += (in.empty() ? "" : ", ") + nodes[a].name();
    for (size_t f : s.frees) fr += (fr.empty() ? "" : ", ") + nodes[f].name();
    if (!in.empty()) t += " <- " + in;
    if (!fr.empty()) t += "; frees " + fr;
    if (s.is<ChainedStep>()) t += " (done by its elementwise chain)";
    if (const ChainStep* c = s.as<ChainStep>()) t += " (runs the elementwise chain of " + std::to_string(c->links.size()) + " steps)";
    if (const ConvGroupStep* g = s.as<ConvGroupStep>(); g && g->keep_blocked)
      t += " (Eval, no gradients: '" + nodes[g->out].name() + "' stays blocked)";
    if (s.is<BlockedPoolStep>()) t += " (Eval, no gradients: pools blocked when its input is)";
    if (const ConvGroupStep* g = s.as<ConvGroupStep>(); g && g->residual_dies)
      t += " (Eval: may write into the buffer of its residual '" + nodes[g->residual].name() + "')";
    t += "\n";
  }
  std::string outs;
  for (size_t k : p.output_pos) outs += (outs.empty() ? "" : ", ") + nodes[k].name();
  t += "outputs: " + outs + "\n";
  t += p.peak >= 0 ? "peak: " + std::to_string(p.peak) + " bytes of live activations (at " + p.peak_at + ")\n"
                   : "peak: unknown (some shape is open; compile with input shapes)\n";
  const StepArena::Stats m = p.arena->stats();
  if (m.reserved_bytes > 0)
    t += "memory plan (inference runs): " + std::to_string(m.planned_blocks) + " blocks in one buffer of " +
         std::to_string(m.reserved_bytes) + " bytes; the last run took " + std::to_string(m.served) +
         " from it and " + std::to_string(m.missed) + " elsewhere\n";
  else
    t += "memory plan (inference runs): " +
         std::string(m.recordings == 0 ? "recorded by the second run"
                                        : "none (no block made and freed within the recorded run, or a memory limit set)") + "\n";
  return t;
}

std::ostream& operator<<(std::ostream& os, const Plan& plan) { return os << plan.dump(); }

}  // namespace loom
