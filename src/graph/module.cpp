#include "loom/graph/module.h"

#include <unordered_set>

#include "graph/serialize_internal.h"
#include "nn/register_kinds.h"

namespace loom::nn {

namespace {

struct ModuleImpl final : LayerBase<ModuleImpl> {
  std::shared_ptr<const Plan> plan;
  const char* kind() const override { return "Module"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return plan->run(in)[0]; }
  Options options() const override { return loom::detail::module_options(plan->graph()); }
};

}  // namespace

Module::Module(const std::vector<Layer>& inputs, const Layer& output, const std::string& name) {
  if (inputs.empty()) throw ValueError("Module: needs at least one input layer");
  auto impl = std::make_shared<ModuleImpl>();
  impl->plan = std::make_shared<const Plan>(Graph::build({output}, inputs));
  impl->inputs = inputs;
  impl->shape = output.shape();
  impl->dtype = output.dtype();
  impl->name = unique_name("module", name);
  // the module's state is the inner layers' states, each once
  std::unordered_set<const State*> seen;
  for (const Layer& l : impl->plan->graph().nodes()) {
    bool is_input = false;
    for (const Layer& i : inputs) is_input = is_input || i == l;
    if (is_input || !seen.insert(l.shared_state().get()).second) continue;
    if (l.state().params().empty() && l.state().buffers().empty() && l.state().children().empty()) continue;
    impl->state->add_child(l.name(), l.shared_state());
  }
  static_cast<Layer&>(*this) = Layer(impl);
}

const Graph& Module::graph() const { return *module_graph(*this); }

const Graph* module_graph(const Layer& layer) {
  auto* m = dynamic_cast<const ModuleImpl*>(layer.impl().get());
  return m ? &m->plan->graph() : nullptr;
}

void detail::register_module_layer(AddKind add) {
  add("Module", [](const LayerSpec& s) -> Layer {
    Graph inner = loom::detail::module_graph_from(s.options);
    if (inner.outputs().size() != 1) s.options.fail("(Module) must have one output");
    Layer l = Module(inner.inputs(), inner.outputs()[0], s.name);
    if (!s.inputs.empty()) l = l.reuse_with(s.inputs, s.name);
    return l;
  });
}

}  // namespace loom::nn
