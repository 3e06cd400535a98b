// The graph compiler and the one evaluator of layer graphs (docs/compile.md). Plan's
// constructor runs the passes over a built Graph (shape specialization, constant folding,
// common-subexpression elimination, dead-node removal), then orders the surviving nodes into
// steps, each with the values it frees after it; run() replays the steps.
#include "loom/graph/graph.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <ostream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "graph/plan_internal.h"
#include "loom/core/grad_mode.h"
#include "loom/graph/module.h"
#include "loom/ops/creation.h"
#include "ops/conv_fused.h"
#include "ops/fused_elementwise.h"

namespace loom {

using nn::Layer;
using nn::LayerImpl;

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
  std::vector<std::string> notes;                // what the passes did, for dump()
  bool specialized = false;                      // compiled for given input shapes
  bool has_multi = false;                        // some node has several outputs
  int64_t peak = -1;
  std::string peak_at;
  std::unique_ptr<StepArena> arena = std::make_unique<StepArena>();  // inference runs' memory plan
};

namespace {

bool is_kind(const Layer& l, const char* kind) { return std::string(l.kind()) == kind; }
std::string label(const Layer& l) { return std::string(l.kind()) + " '" + l.name() + "'"; }

// bytes of a tensor of this shape, -1 when a dimension is open
int64_t bytes_of(const Shape& s, DType dtype) {
  int64_t n = static_cast<int64_t>(itemsize(dtype));
  for (int64_t d : s) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

// declared output shapes and dtypes of a node (several for a Module with several outputs)
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

// What run_fused needs from the group's layers' options.
std::shared_ptr<const FusedGeometry> fused_geometry(const Layer& conv, const Layer* bn) {
  const nn::Options o = conv.options();
  auto g = std::make_shared<FusedGeometry>();
  g->stride = o.get_ints("stride");
  g->dilation = o.get_ints("dilation");
  g->padding = o.is_string("padding") ? ConvPadding(o.get_string("padding")) : ConvPadding(o.get_ints("padding"));
  g->groups = o.get_int("groups");
  g->conv_bias = o.get_bool("bias");
  if (bn) {
    const nn::Options bo = bn->options();
    g->bn_affine = bo.get_bool("affine");
    g->bn_eps = bo.get_float("eps");
  }
  return g;
}

// A Conv2D step and its fused epilogue (Impl::Step::fused_out) as one convolution. `blocked`
// (empty: blocked layouts off for this run) says which slots hold the blocked layout; x is
// read in its layout, the residual converted to the output's, and the output's is recorded.
template <typename Step>
Tensor run_fused(const std::vector<Layer>& nodes, const Step& s, const Tensor& x, std::vector<Tensor>& values,
                 std::vector<char>& blocked) {
  const FusedGeometry& geo = *s.geometry;
  nn::State& cs = nodes[s.node].state();
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
    e.x_blocked = blocked[s.args[0]];
    if (s.keep_blocked || res_blocked)
      e.out_blocked = detail::conv2d_fused_blocked(x, w, geo.stride, geo.padding, geo.dilation, geo.groups) > 0;
    blocked[s.fused_out] = e.out_blocked && s.keep_blocked;
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

std::string names_of(const std::vector<Layer>& ls) {
  std::string names;
  for (const Layer& i : ls) names += (names.empty() ? "'" : ", '") + i.name() + "'";
  return names;
}

}  // namespace

Plan::Plan(Graph graph, const CompileOptions& opt) {
  auto p = std::make_shared<Impl>();
  p->graph = std::make_shared<const Graph>(std::move(graph));
  const Graph& g = *p->graph;
  const std::vector<Layer>& nodes = g.nodes();
  const auto& args = GraphAccess::args(g);
  const size_t n = nodes.size();
  std::unordered_map<const LayerImpl*, size_t> pos;
  for (size_t k = 0; k < n; ++k) pos[nodes[k].impl().get()] = k;
  std::vector<bool> is_input(n, false);
  for (const Layer& i : g.inputs()) {
    p->input_pos.push_back(pos.at(i.impl().get()));
    is_input[p->input_pos.back()] = true;
  }
  // the output of `a` that node k reads (a Module with several outputs feeds ModuleOutputs)
  auto pick = [&](size_t k) { return nodes[k].impl()->reads_output(); };

  // ---- shapes: declared, or specialized to the given input shapes. The leading dimension is
  // the batch: a layer declared with a leading -1 takes it from its inputs (as reuse_with does).
  std::vector<std::vector<Shape>> declared(n);
  for (size_t k = 0; k < n; ++k) declared[k] = declared_shapes(nodes[k]);
  p->shapes = declared;
  for (size_t i = 0; i < p->input_pos.size(); ++i) p->input_shapes.push_back(declared[p->input_pos[i]][0]);
  if (!opt.input_shapes.empty()) {
    if (opt.input_shapes.size() != g.inputs().size())
      throw ValueError("compile: got " + std::to_string(opt.input_shapes.size()) + " input shapes for " +
                       std::to_string(g.inputs().size()) + " graph inputs (" + names_of(g.inputs()) + ")");
    for (size_t i = 0; i < opt.input_shapes.size(); ++i) {
      const Layer& l = g.inputs()[i];
      const Shape& given = opt.input_shapes[i];
      if (!shape_matches(l.shape(), given))
        throw ShapeError("compile: input " + std::to_string(i) + " (" + label(l) + ", declared " + shape_str(l.shape()) +
                         ") cannot take the shape " + shape_str(given) +
                         " (same rank; a declared size must match; -1 keeps a declared -1 open)");
      p->input_shapes[i] = given;
      p->shapes[p->input_pos[i]] = {given};
      for (int64_t d : given) p->specialized = p->specialized || d >= 0;
    }
    for (size_t k = 0; k < n; ++k) {
      if (is_input[k] || args[k].empty()) continue;
      int64_t batch = -1;
      size_t from = 0;
      for (size_t a : args[k]) {
        const size_t o = std::min(pick(k), p->shapes[a].size() - 1);
        const Shape& s = p->shapes[a][o];
        if (s.empty() || declared[a][o].empty() || declared[a][o][0] != -1 || s[0] < 0) continue;
        if (batch >= 0 && s[0] != batch && s[0] != 1 && batch != 1)
          throw ShapeError("compile: " + label(nodes[k]) + " combines a batch of " + std::to_string(batch) + " (from '" +
                           nodes[from].name() + "') with a batch of " + std::to_string(s[0]) + " (from '" + nodes[a].name() +
                           "') for the given input shapes");
        if (batch < 0 || batch == 1) batch = s[0], from = a;
      }
      if (batch < 0) continue;
      for (Shape& s : p->shapes[k])
        if (!s.empty() && s[0] == -1) s[0] = batch;
    }
  }

  // ---- constant folding: a pure, stateless node computed only from constants (Constant layers
  // whose value needs no gradient, or other such nodes) is evaluated here, once.
  std::vector<bool> constant(n, false), folded(n, false);
  std::vector<std::vector<Tensor>> const_value(n);
  if (opt.fold_constants) {
    for (size_t k = 0; k < n; ++k) {
      if (is_input[k]) continue;
      const Layer& l = nodes[k];
      if (args[k].empty()) {
        if (is_kind(l, "Constant") && state_free(l)) {
          Tensor v = l.impl()->compute({}, nn::Mode::Eval);
          if (!v.requires_grad()) constant[k] = true, const_value[k] = {v};
        }
        continue;
      }
      bool c = l.impl()->pure() && state_free(l);
      for (size_t a : args[k]) c = c && constant[a];
      if (!c) continue;
      std::vector<Tensor> in;
      for (size_t a : args[k]) in.push_back(const_value[a].at(std::min(pick(k), const_value[a].size() - 1)));
      const_value[k] = l.impl()->n_outputs() > 1 ? l.impl()->compute_outputs(in, nn::Mode::Eval)
                                                 : std::vector<Tensor>{l.impl()->compute(in, nn::Mode::Eval)};
      constant[k] = true;
      folded[k] = true;
    }
  }

  // ---- common subexpressions: the same pure kind with the same State, options and inputs
  // computes the same value; later copies read the first.
  std::vector<size_t> alias(n);
  std::iota(alias.begin(), alias.end(), size_t{0});
  if (opt.eliminate_common_subexpressions) {
    using Key = std::tuple<std::string, const nn::State*, size_t, std::vector<size_t>>;
    std::map<Key, std::vector<size_t>> seen;
    std::unordered_map<size_t, std::string> options_json;
    auto options_of = [&](size_t k) -> const std::string& {
      auto it = options_json.find(k);
      if (it == options_json.end()) it = options_json.emplace(k, nodes[k].options().to_json()).first;
      return it->second;
    };
    for (size_t k = 0; k < n; ++k) {
      if (is_input[k] || folded[k] || args[k].empty() || !nodes[k].impl()->pure()) continue;
      std::vector<size_t> in;
      for (size_t a : args[k]) in.push_back(alias[a]);
      auto& candidates = seen[Key{nodes[k].kind(), nodes[k].shared_state().get(), pick(k), in}];
      for (size_t j : candidates) {
        if (declared[j] != declared[k] || dtypes_of(nodes[j]) != dtypes_of(nodes[k]) || options_of(j) != options_of(k)) continue;
        alias[k] = j;
        p->notes.push_back("merge  " + label(nodes[k]) + " -> " + label(nodes[j]) + " (same kind, options, state and inputs)");
        break;
      }
      if (alias[k] == k) candidates.push_back(k);
    }
  }

  // ---- dead nodes: what no output reaches once folded nodes stop at their value and merged
  // nodes read their first copy. Graph inputs stay (they are the positional interface).
  for (const Layer& o : g.outputs()) p->output_pos.push_back(alias[pos.at(o.impl().get())]);
  std::vector<bool> live(n, !opt.remove_dead_nodes);
  for (size_t k : p->output_pos) live[k] = true;
  for (size_t k = n; k-- > 0;) {
    if (!live[k] || alias[k] != k || folded[k]) continue;
    for (size_t a : args[k]) live[alias[a]] = true;
  }
  for (size_t k = 0; k < n; ++k) {
    if (is_input[k] || alias[k] != k) continue;
    if (!live[k]) {
      p->notes.push_back("dead   " + label(nodes[k]) + " (no output reads it after the other passes)");
    } else if (folded[k]) {
      p->constants.emplace_back(k, const_value[k]);
      p->notes.push_back("fold   " + label(nodes[k]) + " " + shape_str(const_value[k][0].shape()) +
                         " computed once at compile time (it depends only on constants)");
    }
  }

  // ---- steps and liveness: each slot is released after its last reader (outputs and folded
  // constants are kept)
  std::vector<size_t> last(n, SIZE_MAX);
  for (size_t k = 0; k < n; ++k) {
    if (is_input[k] || alias[k] != k || !live[k] || folded[k]) continue;
    Impl::Step s;
    s.node = k;
    for (size_t a : args[k]) s.args.push_back(alias[a]);
    for (size_t a : s.args) last[a] = p->steps.size();
    p->has_multi = p->has_multi || nodes[k].impl()->n_outputs() > 1;
    p->steps.push_back(std::move(s));
  }
  std::vector<bool> kept(n, false);
  for (size_t k : p->output_pos) kept[k] = true;
  for (const auto& c : p->constants) kept[c.first] = true;
  for (size_t k = 0; k < n; ++k)
    if (last[k] != SIZE_MAX && !kept[k]) p->steps[last[k]].frees.push_back(k);

  // who reads each slot, and each node's step, for the two fusion passes (which change neither)
  std::vector<size_t> readers(n, 0), step_of(n, SIZE_MAX);
  std::vector<bool> is_out(n, false);
  for (size_t k : p->output_pos) is_out[k] = true;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    step_of[p->steps[i].node] = i;
    for (size_t a : p->steps[i].args) ++readers[a];
  }

  // ---- inference epilogues (Eval mode): Conv2D -> [BatchNorm] -> [Add residual] -> [ReLU], each
  // link read by nothing but the next one, runs as one convolution (ops/conv_fused.h). The
  // residual must be computed before the convolution's step, and of its output's shape.
  if (opt.fuse_conv_epilogues) {
    // the one step reading slot k, when k is read once and is no output
    auto sole_reader = [&](size_t k) -> const Impl::Step* {
      if (readers[k] != 1 || is_out[k]) return nullptr;
      for (const Impl::Step& s : p->steps)
        if (std::find(s.args.begin(), s.args.end(), k) != s.args.end()) return &s;
      return nullptr;
    };
    for (size_t i = 0; i < p->steps.size(); ++i) {
      Impl::Step& conv = p->steps[i];
      const Layer& c = nodes[conv.node];
      if (conv.fused_away || !is_kind(c, "Conv2D") || conv.args.size() != 1 || c.dtype() != DType::Float32 ||
          pick(conv.node) != 0)
        continue;
      size_t end = conv.node, bn = SIZE_MAX, residual = SIZE_MAX;
      bool relu = false;
      std::vector<size_t> members;
      std::string text = label(c);
      const Impl::Step* next = sole_reader(end);
      if (next && is_kind(nodes[next->node], "BatchNorm") && next->args.size() == 1) {
        bn = end = next->node;
        members.push_back(bn);
        text += " + " + label(nodes[bn]);
        next = sole_reader(end);
      }
      if (next && is_kind(nodes[next->node], "Add") && next->args.size() == 2) {
        const size_t other = next->args[0] == end ? next->args[1] : next->args[0];
        const bool before = step_of[other] == SIZE_MAX || step_of[other] < i;
        if (other != end && before && p->shapes[other] == p->shapes[end] && nodes[other].dtype() == DType::Float32) {
          residual = other;
          end = next->node;
          members.push_back(end);
          text += " + " + label(nodes[end]) + " (residual '" + nodes[other].name() + "')";
          next = sole_reader(end);
        }
      }
      if (next && is_kind(nodes[next->node], "Activation") && nodes[next->node].options().get_string("fn") == "relu") {
        relu = true;
        end = next->node;
        members.push_back(end);
        text += " + " + label(nodes[end]);
      }
      if (members.empty()) continue;
      conv.fused_out = end;
      conv.bn = bn;
      conv.residual = residual;
      conv.relu = relu;
      conv.geometry = fused_geometry(c, bn == SIZE_MAX ? nullptr : &nodes[bn]);
      for (size_t m : members) p->steps[step_of[m]].fused_away = true;
      p->notes.push_back("fuse   " + text + " (Eval mode: one convolution, batch norm folded, post-ops)");
    }
  }

  // ---- blocked layouts (Eval mode, no gradients): a fused group's output whose every reader is
  // a fused convolution (as its input or its residual; groups 1) and that is no graph output
  // stays in the layout the convolutions compute in (oneDNN's nChw8c / nChw16c) rather than
  // being converted to NCHW after one and back before the next. Whether it does is decided per
  // run from the shapes (channels a multiple of the block; conv_fused.h).
  if (opt.fuse_conv_epilogues && opt.blocked_layouts) {
    std::vector<size_t> capable(n, 0);  // the reads of each slot that a fused convolution makes
    std::vector<std::string> by(n);
    for (const Impl::Step& s : p->steps) {
      if (s.fused_out == SIZE_MAX || s.geometry->groups != 1) continue;
      for (size_t a : {s.args[0], s.residual}) {
        if (a == SIZE_MAX) continue;
        ++capable[a];
        by[a] += (by[a].empty() ? "" : ", ") + label(nodes[s.node]);
      }
    }
    // a MaxPool2D whose output only fused convolutions read can read and write blocked: it is
    // then a capable reader of its input
    for (Impl::Step& s : p->steps) {
      const Layer& l = nodes[s.node];
      const size_t k = s.node;
      if (!is_kind(l, "MaxPool2D") || l.dtype() != DType::Float32 || s.args.size() != 1 || is_out[k] || readers[k] == 0 ||
          capable[k] != readers[k])
        continue;
      const nn::Options o = l.options();
      s.pool_blocked = true;
      s.pool_kernel = o.get_ints("kernel_size");
      s.pool_stride = o.get_ints("stride");
      s.pool_padding = o.get_ints("padding");
      s.pool_ceil = o.get_bool("ceil_mode");
      ++capable[s.args[0]];
      by[s.args[0]] += (by[s.args[0]].empty() ? "" : ", ") + label(l);
      p->notes.push_back("block  " + label(l) + " pools in the convolutions' blocked layout (read only by fused " + by[k] + ")");
    }
    for (Impl::Step& s : p->steps) {
      const size_t k = s.fused_out;
      if (k == SIZE_MAX || s.geometry->groups != 1 || is_out[k] || readers[k] == 0 || capable[k] != readers[k]) continue;
      s.keep_blocked = true;
      p->notes.push_back("block  " + label(nodes[k]) + " stays in the convolutions' blocked layout (read only by fused " +
                         by[k] + ")");
    }
  }

  // ---- elementwise chains (any mode): Add / Subtract / Multiply of two operands and relu /
  // sigmoid / tanh Activations in float32, each link read by nothing but the next, run as one
  // pass over the operands when no gradient is needed (ops/fused_elementwise.h), and one op at
  // a time otherwise. The chain runs at its last step, so the frees of the others move there.
  if (opt.fuse_elementwise) {
    using Op = detail::ElementwiseChain::Op;
    auto op_of = [&](size_t i, Op& op) {
      const Impl::Step& s = p->steps[i];
      const Layer& l = nodes[s.node];
      if (s.fused_away || s.fused_out != SIZE_MAX || s.chain || s.chained_away || l.dtype() != DType::Float32 ||
          pick(s.node) != 0 || l.impl()->n_outputs() != 1)
        return false;
      // operands of another shape (a broadcast) would make every run take the op-by-op path
      const Shape& shape = p->shapes[s.node][0];
      for (size_t a : s.args) {
        const Shape& sa = p->shapes[a][0];
        if (sa.size() != shape.size()) return false;
        for (size_t d = 0; d < sa.size(); ++d)
          if (sa[d] >= 0 && shape[d] >= 0 && sa[d] != shape[d]) return false;
      }
      if (s.args.size() == 2 && is_kind(l, "Add")) return op = Op::Add, true;
      if (s.args.size() == 2 && is_kind(l, "Subtract")) return op = Op::Sub, true;
      if (s.args.size() == 2 && is_kind(l, "Multiply")) return op = Op::Mul, true;
      if (s.args.size() != 1 || !is_kind(l, "Activation")) return false;
      const std::string fn = l.options().get_string("fn");
      if (fn == "relu") return op = Op::Relu, true;
      if (fn == "sigmoid") return op = Op::Sigmoid, true;
      if (fn == "tanh") return op = Op::Tanh, true;
      return false;
    };
    // the step reading slot k when it is read once, is no output, and that step can join a chain
    auto next_link = [&](size_t k, Op& op) -> size_t {
      if (readers[k] != 1 || is_out[k]) return SIZE_MAX;
      for (size_t i = step_of[k] + 1; i < p->steps.size(); ++i)
        if (std::find(p->steps[i].args.begin(), p->steps[i].args.end(), k) != p->steps[i].args.end())
          return op_of(i, op) ? i : SIZE_MAX;
      return SIZE_MAX;
    };
    for (size_t i = 0; i < p->steps.size(); ++i) {
      Op op;
      if (!op_of(i, op)) continue;
      std::vector<std::pair<size_t, Op>> links{{i, op}};
      for (size_t j; (j = next_link(p->steps[links.back().first].node, op)) != SIZE_MAX;) links.push_back({j, op});
      if (links.size() < 2) continue;
      auto chain = std::make_shared<detail::ElementwiseChain>();
      std::vector<size_t> inputs;
      auto input = [&](size_t slot) {
        const auto it = std::find(inputs.begin(), inputs.end(), slot);
        if (it != inputs.end()) return static_cast<int>(it - inputs.begin());
        inputs.push_back(slot);
        return static_cast<int>(inputs.size() - 1);
      };
      std::string text;
      size_t acc = SIZE_MAX;  // the slot the chain's value stands for
      for (const auto& [k, o] : links) {
        const Impl::Step& s = p->steps[k];
        detail::ElementwiseChain::Step st{o};
        if (acc == SIZE_MAX) {
          chain->start = input(s.args[0]);
          if (s.args.size() == 2) st.operand = input(s.args[1]);
        } else if (s.args.size() == 2) {
          st.acc_first = s.args[0] == acc;
          st.operand = input(st.acc_first ? s.args[1] : s.args[0]);
        }
        chain->steps.push_back(st);
        acc = s.node;
        text += (text.empty() ? "" : " -> ") + label(nodes[s.node]);
      }
      Impl::Step& last = p->steps[links.back().first];
      for (size_t l = 0; l + 1 < links.size(); ++l) {
        Impl::Step& s = p->steps[links[l].first];
        s.chained_away = true;
        last.frees.insert(last.frees.end(), s.frees.begin(), s.frees.end());
        s.frees.clear();
        last.chain_steps.push_back(links[l].first);
      }
      last.chain_steps.push_back(links.back().first);
      // the chain reads its inputs at its last step: a step in between that was an input's last
      // reader (by position) must not free it before then
      for (size_t k = links.front().first + 1; k < links.back().first; ++k) {
        std::vector<size_t>& fr = p->steps[k].frees;
        for (auto it = fr.begin(); it != fr.end();)
          if (std::find(inputs.begin(), inputs.end(), *it) != inputs.end()) {
            last.frees.push_back(*it);
            it = fr.erase(it);
          } else {
            ++it;
          }
      }
      last.chain = std::move(chain);
      last.chain_inputs = std::move(inputs);
      p->notes.push_back("fuse   " + text + " (one elementwise pass when no gradient is needed)");
    }
  }

  // ---- in place: a fused convolution's residual that no later step reads (its last reader is
  // the group's Add, done by the convolution) is handed to it, which then writes its output into
  // the residual's buffer when nothing else holds it (conv_fused.h): no copy, no new block
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Impl::Step& conv = p->steps[i];
    if (conv.residual == SIZE_MAX) continue;
    size_t freed_at = SIZE_MAX;
    for (size_t k = i; k < p->steps.size() && freed_at == SIZE_MAX; ++k)
      if (std::find(p->steps[k].frees.begin(), p->steps[k].frees.end(), conv.residual) != p->steps[k].frees.end())
        freed_at = k;
    bool read_between = false;
    for (size_t k = i + 1; k < freed_at && k < p->steps.size(); ++k) {
      const Impl::Step& o = p->steps[k];
      auto reads = [&](const std::vector<size_t>& v) { return std::find(v.begin(), v.end(), conv.residual) != v.end(); };
      read_between = read_between || reads(o.args) || reads(o.chain_inputs);
    }
    // the freeing step, the one reader after this step, is then the group's own Add (it comes
    // after the convolution and reads the residual), which runs as part of this step
    conv.residual_dies = freed_at != SIZE_MAX && !read_between && p->steps[freed_at].fused_away &&
                         std::find(p->steps[freed_at].args.begin(), p->steps[freed_at].args.end(), conv.residual) !=
                             p->steps[freed_at].args.end();
  }

  // ---- shapes the batch rule leaves open (spatial sizes, sequence lengths): with every input
  // size given, the plan runs once here on zeros of those shapes, in Eval mode without
  // gradients (no layer writes its State then), and records what each step produces.
  bool open = false, all_given = p->specialized;
  for (const Shape& s : p->input_shapes)
    for (int64_t d : s) all_given = all_given && d >= 0;
  for (const Impl::Step& s : p->steps)
    for (const Shape& sh : p->shapes[s.node])
      for (int64_t d : sh) open = open || d < 0;
  if (open && all_given) {
    impl_ = p;
    // every node's shapes from one run on zeros of `in_shapes` (checked against those shapes only)
    auto run_on_zeros = [&](std::vector<Shape> in_shapes) {  // a copy: it may be the plan's own
      // the run checks its inputs against in_shapes and nothing against the compiled shapes;
      // the plan's own are back when it ends, thrown or not
      struct Restore {
        Impl& p;
        std::vector<Shape> input_shapes;
        bool specialized;
        ~Restore() { p.input_shapes = std::move(input_shapes), p.specialized = specialized; }
      } restore{*p, std::exchange(p->input_shapes, in_shapes), std::exchange(p->specialized, false)};
      std::vector<Tensor> zero_inputs;
      for (size_t i = 0; i < in_shapes.size(); ++i) zero_inputs.push_back(zeros(in_shapes[i], g.inputs()[i].dtype()));
      std::vector<std::vector<Shape>> found = p->shapes;
      NoGrad no_grad;
      nn::ModeScope eval(nn::Mode::Eval);
      detail::PreparedWeightsNotKept once;  // unfused, maybe at a probe's batch: not the runs' layouts
      execute(zero_inputs, &found);
      return found;
    };
    // A batch of B > 2 is probed at batches 1 and 2 instead (a whole forward at B is what a
    // specialized compile of a large batch used to cost): a size equal in both probes is taken
    // as it is, a leading size that follows the probes (1, then 2) where the batch rule gave B
    // is B, and anything else (a size that grows with the batch elsewhere, a probe that throws)
    // falls back to the run at the given shapes, which also names the node of a real error.
    int64_t batch = -1;
    bool probe = true;
    for (size_t i = 0; i < p->input_shapes.size(); ++i) {
      const Shape& s = p->input_shapes[i];
      if (s.empty() || g.inputs()[i].shape().empty() || g.inputs()[i].shape()[0] != -1 || s[0] == 1) continue;
      if (batch >= 0 && s[0] != batch) probe = false;
      batch = s[0];
    }
    std::optional<std::vector<std::vector<Shape>>> merged;
    if (probe && batch > 2) {
      try {
        std::vector<std::vector<Shape>> runs[2];
        for (int64_t b = 1; b <= 2; ++b) {
          std::vector<Shape> small = p->input_shapes;
          for (size_t i = 0; i < small.size(); ++i)
            if (!small[i].empty() && !g.inputs()[i].shape().empty() && g.inputs()[i].shape()[0] == -1 && small[i][0] == batch)
              small[i][0] = b;
          runs[b - 1] = run_on_zeros(small);
        }
        merged.emplace(n);
        for (size_t k = 0; k < n && merged; ++k) {
          const auto &one = runs[0][k], &two = runs[1][k];
          bool same = one.size() == two.size();
          for (size_t o = 0; same && o < one.size(); ++o) {
            same = one[o].size() == two[o].size();
            const Shape& rule = p->shapes[k][std::min(o, p->shapes[k].size() - 1)];
            Shape out = one[o];
            for (size_t d = 0; same && d < out.size(); ++d) {
              if (one[o][d] == two[o][d]) continue;
              same = d == 0 && one[o][0] == 1 && two[o][0] == 2 && !rule.empty() && rule[0] == batch;
              out[0] = batch;
            }
            (*merged)[k].push_back(std::move(out));
          }
          if (!same) merged.reset();
        }
      } catch (const std::exception&) {
        merged.reset();
      }
    }
    p->shapes = merged ? std::move(*merged) : run_on_zeros(p->input_shapes);
  }

  // ---- peak bytes of live activations: inputs (their owners keep them during the run), then
  // per step what is live while it runs (a Module's inner peak counts in its step)
  int64_t live_bytes = 0;
  bool known = true;
  auto bytes = [&](size_t k) {
    int64_t b = 0;
    const std::vector<DType> dt = dtypes_of(nodes[k]);
    for (size_t o = 0; o < p->shapes[k].size(); ++o) {
      const int64_t x = bytes_of(p->shapes[k][o], dt[std::min(o, dt.size() - 1)]);
      if (x < 0) known = false;
      b += std::max<int64_t>(x, 0);
    }
    return b;
  };
  for (size_t k : p->input_pos) live_bytes += bytes(k);
  int64_t peak = live_bytes;
  p->peak_at = "the inputs";
  std::vector<bool> is_input_slot = is_input;
  for (const Impl::Step& s : p->steps) {
    // a Constant or a free Input hands out the tensor it holds: nothing new is allocated
    // (nor does a step done by its elementwise chain, which writes only the chain's output)
    const bool holds = is_kind(nodes[s.node], "Constant") || is_kind(nodes[s.node], "Input") || s.chained_away;
    const int64_t out = holds ? 0 : bytes(s.node);
    int64_t during = out;
    if (const Graph* inner = nn::module_graph(nodes[s.node]); inner && known) {
      std::vector<Shape> in_shapes;
      int64_t in_bytes = 0;
      for (size_t a : s.args) {
        in_shapes.push_back(p->shapes[a][std::min(pick(s.node), p->shapes[a].size() - 1)]);
        in_bytes += bytes_of(in_shapes.back(), nodes[a].dtype());
      }
      const Plan inner_plan(*inner, CompileOptions{in_shapes});
      if (inner_plan.peak_bytes() >= 0) during = std::max(during, inner_plan.peak_bytes() - in_bytes);
    }
    if (live_bytes + during > peak) peak = live_bytes + during, p->peak_at = "step " + label(nodes[s.node]);
    live_bytes += out;
    for (size_t f : s.frees)
      if (!is_input_slot[f] && !is_kind(nodes[f], "Constant") && !is_kind(nodes[f], "Input")) live_bytes -= bytes(f);
  }
  p->peak = known ? peak : -1;
  impl_ = std::move(p);
}

const Graph& Plan::graph() const { return *impl_->graph; }
const std::vector<Shape>& Plan::input_shapes() const { return impl_->input_shapes; }
bool Plan::shape_polymorphic() const {
  for (const Shape& s : impl_->input_shapes)
    for (int64_t d : s)
      if (d < 0) return true;
  return false;
}
int64_t Plan::peak_bytes() const { return impl_->peak; }

StepArena::Stats Plan::memory_plan() const { return impl_->arena->stats(); }

std::vector<Tensor> Plan::run(const std::vector<Tensor>& xs) const {
  // With gradients recorded most blocks outlive the run (autograd keeps them for backward), and
  // a training step plans the forward and backward together in its own arena.
  if (grad_enabled()) return execute(xs, nullptr);
  StepArena::Scope planned(*impl_->arena, StepArena::if_free);
  return execute(xs, nullptr);
}

std::vector<Tensor> Plan::execute(const std::vector<Tensor>& xs, std::vector<std::vector<Shape>>* record) const {
  const Impl& p = *impl_;
  const Graph& g = *p.graph;
  const std::vector<Layer>& nodes = g.nodes();
  const std::vector<Layer>& ins = g.inputs();
  if (!xs.empty() && xs.size() != ins.size()) {
    std::string names;
    for (const Layer& i : ins) names += (names.empty() ? "" : ", ") + i.name();
    throw ValueError("Plan: got " + std::to_string(xs.size()) + " input tensors for " + std::to_string(ins.size()) +
                     " graph inputs (" + names + "); pass all of them, or none to read the Input layers' values");
  }
  const nn::Mode mode = nn::current_mode();
  const size_t n = nodes.size();
  std::vector<Tensor> values(n);
  std::vector<std::vector<Tensor>> multi(p.has_multi ? n : 0);  // every output of a node with several
  for (size_t i = 0; i < ins.size(); ++i) {
    const Layer& l = ins[i];
    Tensor x;
    if (!xs.empty()) {
      x = xs[i];
    } else if (is_kind(l, "Input")) {
      x = l.impl()->compute({}, mode);  // its value or default; ValueError naming it otherwise
    } else {
      throw ValueError("Plan: graph input " + std::to_string(i) + " (" + label(l) +
                       ") is not an Input layer, so it holds no value to read: pass the input tensors (" + names_of(ins) + ")");
    }
    const Shape& want = p.input_shapes[i];
    if (!x.defined() || !shape_matches(want, x.shape()))
      throw ShapeError("Plan: input " + std::to_string(i) + " ('" + l.name() + "') expects shape " + shape_str(want) +
                       (p.specialized ? " (compiled for it; -1: any size)" : " (-1: any size)") + ", got " +
                       (x.defined() ? shape_str(x.shape()) : "an undefined tensor"));
    // as Input::set_value: no silent promotion (int64 into a float32 graph would run in float64)
    if (x.dtype() != l.dtype())
      throw DTypeError("Plan: input " + std::to_string(i) + " ('" + l.name() + "') expects dtype " + dtype_name(l.dtype()) +
                       ", got " + dtype_name(x.dtype()) + " (convert it with astype)");
    values[p.input_pos[i]] = std::move(x);
  }
  for (const auto& [k, outs] : p.constants) {
    values[k] = outs[0];
    if (p.has_multi && outs.size() > 1) multi[k] = outs;
  }
  // fused groups run in Eval mode only (Train-mode batch norm uses the batch's statistics), and
  // not in the compile-time shape run, which records every node's shape
  const bool fuse = mode == nn::Mode::Eval && !record;
  std::vector<char> blocked(fuse && !grad_enabled() ? n : 0, 0);  // slots in the blocked layout
  std::vector<Tensor> args;
  for (const Impl::Step& s : p.steps) {
    args.clear();
    LayerImpl& node = *nodes[s.node].impl();
    const size_t pick = node.reads_output();
    for (size_t a : s.args) args.push_back(pick && p.has_multi && !multi[a].empty() ? multi[a].at(pick) : values[a]);
    if (record) {
      // compile-time shape inference: an op's error names the node it came from
      try {
        if (node.n_outputs() > 1) multi[s.node] = node.compute_outputs(args, mode);
        else values[s.node] = node.compute(args, mode);
      } catch (const ShapeError& e) {
        throw ShapeError("compile: " + label(nodes[s.node]) + " fails for the given input shapes: " + e.what());
      } catch (const ValueError& e) {
        throw ValueError("compile: " + label(nodes[s.node]) + " fails for the given input shapes: " + e.what());
      }
      auto& shapes = (*record)[s.node];
      shapes.clear();
      if (node.n_outputs() > 1) {
        values[s.node] = multi[s.node].at(0);
        for (const Tensor& t : multi[s.node]) shapes.push_back(t.shape());
      } else {
        shapes.push_back(values[s.node].shape());
      }
    } else if (s.chained_away || (fuse && s.fused_away)) {
      // done by its chain's last step, or by its group's convolution step
    } else if (s.chain) {
      std::vector<Tensor> operands;
      for (size_t a : s.chain_inputs) operands.push_back(values[a]);
      values[s.node] = detail::elementwise_chain(*s.chain, operands);
      if (!values[s.node].defined()) {
        // gradients needed, or operands the pass cannot take (broadcast, strided, ...): op by op
        for (size_t k : s.chain_steps) {
          const Impl::Step& m = p.steps[k];
          std::vector<Tensor> margs;
          for (size_t a : m.args) margs.push_back(values[a]);
          values[m.node] = nodes[m.node].impl()->compute(margs, mode);
        }
      }
    } else if (fuse && s.fused_out != SIZE_MAX) {
      values[s.fused_out] = run_fused(nodes, s, args[0], values, blocked);
    } else if (s.pool_blocked && !blocked.empty() && blocked[s.args[0]]) {
      values[s.node] = detail::max_pool2d_blocked(args[0], s.pool_kernel, s.pool_stride, s.pool_padding, s.pool_ceil);
      blocked[s.node] = 1;
    } else if (node.n_outputs() > 1) {
      multi[s.node] = node.compute_outputs(args, mode);
      values[s.node] = multi[s.node].at(0);
    } else {
      values[s.node] = node.compute(args, mode);
    }
    const size_t produced = fuse && s.fused_out != SIZE_MAX ? s.fused_out : s.node;
    if (p.specialized && !s.chained_away && !(fuse && s.fused_away)) {
      const Shape& want = p.shapes[produced][0];
      const Shape& got = values[produced].shape();
      if (!shape_matches(want, got))
        throw ShapeError("Plan: " + label(nodes[produced]) + " produced shape " + shape_str(got) + " but the plan was compiled for " +
                         shape_str(want) + " (compile without input shapes for a graph whose sizes vary otherwise)");
    }
    for (size_t f : s.frees) {
      values[f] = Tensor();
      if (p.has_multi) multi[f].clear();
    }
  }
  std::vector<Tensor> outs;
  outs.reserve(p.output_pos.size());
  for (size_t k : p.output_pos) outs.push_back(values[k]);
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
  if (p.notes.empty()) t += "  (nothing removed, merged or folded)\n";
  for (const std::string& s : p.notes) t += "  " + s + "\n";
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
    if (s.chained_away) t += " (done by its elementwise chain)";
    if (s.chain) t += " (runs the elementwise chain of " + std::to_string(s.chain_steps.size()) + " steps)";
    if (s.keep_blocked) t += " (Eval, no gradients: '" + nodes[s.fused_out].name() + "' stays blocked)";
    if (s.pool_blocked) t += " (Eval, no gradients: pools blocked when its input is)";
    if (s.residual_dies) t += " (Eval: may write into the buffer of its residual '" + nodes[s.residual].name() + "')";
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
