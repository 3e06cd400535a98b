#include "loom/graph/module.h"

#include <unordered_set>

#include "graph/serialize_internal.h"
#include "loom/nn/layers.h"
#include "nn/register_kinds.h"

namespace loom::nn {

namespace {

struct ModuleImpl final : LayerBase<ModuleImpl> {
  std::shared_ptr<const Plan> plan;
  const char* kind_name = "Module";  // or "Sequential"
  bool pure_ = false;                 // every inner layer is pure
  bool pure() const override { return pure_; }
  const char* kind() const override { return kind_name; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return plan->run(in)[0]; }
  size_t n_outputs() const override { return plan->graph().outputs().size(); }
  std::vector<Tensor> compute_outputs(const std::vector<Tensor>& in, Mode) override { return plan->run(in); }
  Options options() const override { return loom::detail::module_options(plan->graph()); }
  // the inner graph compiled for these input shapes (its kinds' rules; nothing runs)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    if (in == plan->input_shapes()) return plan->output_shapes();
    CompileOptions shapes_only{in};
    shapes_only.fold_constants = shapes_only.fuse_conv_epilogues = shapes_only.fuse_elementwise = false;
    return Plan(plan->graph(), shapes_only).output_shapes();
  }
};

// Output `index` of its one input, a module with several outputs (the Plan passes it that output).
struct ModuleOutputImpl final : LayerBase<ModuleOutputImpl> {
  bool pure() const override { return true; }
  ModuleOutputAttributes attrs;
  const void* attributes(const std::type_info& type) const override { return type == typeid(ModuleOutputAttributes) ? &attrs : nullptr; }
  const char* kind() const override { return "ModuleOutput"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return in[0]; }
  size_t reads_output() const override { return static_cast<size_t>(attrs.index); }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
  Options options() const override { return Options().set_int("index", attrs.index); }
};

Layer make_module(const std::vector<Layer>& inputs, const std::vector<Layer>& outputs, const std::string& name, const char* kind) {
  if (inputs.empty()) throw ValueError(std::string(kind) + ": needs at least one input layer");
  if (outputs.empty()) throw ValueError(std::string(kind) + ": needs at least one output layer");
  auto impl = std::make_shared<ModuleImpl>();
  impl->kind_name = kind;
  impl->plan = std::make_shared<const Plan>(Graph::build(outputs, inputs));
  const Graph& g = impl->plan->graph();
  impl->inputs = g.inputs();
  impl->shape = g.outputs()[0].shape();
  impl->dtype = g.outputs()[0].dtype();
  impl->name = unique_name(kind == std::string("Module") ? "module" : "sequential", name);
  // the module's state is the inner layers' states, each once
  std::unordered_set<const State*> seen;
  impl->pure_ = true;
  for (const Layer& l : g.nodes()) {
    bool is_input = false;
    for (const Layer& i : g.inputs()) is_input = is_input || i == l;
    if (!is_input) impl->pure_ = impl->pure_ && l.impl()->pure();
    if (is_input || !seen.insert(l.shared_state().get()).second) continue;
    if (l.state().params().empty() && l.state().buffers().empty() && l.state().children().empty()) continue;
    impl->state->add_child(l.name(), l.shared_state());
  }
  return Layer(impl);
}

// Rebuilds a saved Module or Sequential (its inner graph is its options), on its saved inputs.
Layer module_from(const LayerSpec& s, const char* kind) {
  Graph inner = loom::detail::module_graph_from(s.options);
  Layer l = make_module(inner.inputs(), inner.outputs(), s.name, kind);
  if (!s.inputs.empty()) l = l.reuse_with(s.inputs, s.name);
  return l;
}

}  // namespace

Module::Module(const std::vector<Layer>& inputs, const Layer& output, const std::string& name)
    : Layer(make_module(inputs, {output}, name, "Module")) {}

Module::Module(const std::vector<Layer>& inputs, const std::vector<Layer>& outputs, const std::string& name)
    : Layer(make_module(inputs, outputs, name, "Module")) {}

const Graph& Module::graph() const { return *module_graph(*this); }
size_t Module::n_outputs() const { return graph().outputs().size(); }
Layer Module::output(size_t i, const std::string& name) const { return module_output(*this, i, name); }

const Graph* module_graph(const Layer& layer) {
  if (!layer.bound()) return nullptr;
  auto* m = dynamic_cast<const ModuleImpl*>(layer.node().impl().get());
  return m ? &m->plan->graph() : nullptr;
}

Layer module_output(const Layer& handle, size_t i, const std::string& name) {
  if (!handle.defined()) throw ValueError("module_output: the module layer is undefined");
  const Layer module = handle.node();
  const Graph* g = module_graph(module);
  const size_t n = g ? g->outputs().size() : 1;
  if (!g || n < 2)
    throw ValueError("module_output: " + std::string(module.kind()) + " '" + module.name() + "' has " + (g ? "one output" : "no inner graph") +
                     " (valid: a Module with several outputs)");
  if (i >= n)
    throw IndexError("module_output: " + std::string(module.kind()) + " '" + module.name() + "' has " + std::to_string(n) + " outputs, index " +
                     std::to_string(i) + " is out of range");
  auto impl = std::make_shared<ModuleOutputImpl>();
  impl->attrs.index = static_cast<int64_t>(i);
  impl->inputs = {module};
  impl->shape = g->outputs()[i].shape();
  if (!impl->shape.empty() && !module.shape().empty()) impl->shape[0] = module.shape()[0];  // the batch follows reuse_with
  impl->dtype = g->outputs()[i].dtype();
  impl->name = unique_name(module.name() + "_out" + std::to_string(i), name);
  return Layer(impl);
}

Sequential::Sequential(std::vector<Step> steps, const std::string& name)
    : Layer(unbound_layer(
          "Sequential",
          [steps = std::move(steps)](const LayerSpec& s) -> Layer {
            const Layer& x = s.input();
            Input in(x.shape(), x.dtype(), s.name + "_input");
            Layer h = in;
            for (size_t k = 0; k < steps.size(); ++k) {
              if (!steps[k]) throw ValueError("Sequential '" + s.name + "': step " + std::to_string(k) + " is empty");
              h = steps[k](h);
              if (!h.defined()) throw ValueError("Sequential '" + s.name + "': step " + std::to_string(k) + " returned an undefined layer");
            }
            return make_module({in}, {h}, s.name, "Sequential").reuse_with({x}, s.name);
          },
          name)) {}

Sequential::Sequential(const Layer& input, std::vector<Step> steps, const std::string& name)
    : Layer(Sequential(std::move(steps), name)(input).impl()) {}

void detail::register_module_layer(AddKind add) {
  add("Module", [](const LayerSpec& s) { return module_from(s, "Module"); }, {});
  add("Sequential", [](const LayerSpec& s) { return module_from(s, "Sequential"); }, {});
  add("ModuleOutput", [](const LayerSpec& s) {
    return module_output(s.input(), static_cast<size_t>(s.options.get_int("index", 0, INT32_MAX)), s.name);
  }, {Options().set_int("index", 0)});
}

}  // namespace loom::nn
