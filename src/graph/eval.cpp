// Layer::operator()(): nn declares it, graph defines it. Evaluating a layer graph is the graph
// part's job (Graph::build traces it, Plan runs it: one evaluator), and nn, below graph, may not
// include graph's headers; the library is one binary, so the definition links. nn only holds
// the compiled plan opaquely (LayerImpl::eval_cache), so `l()` compiles once per layer.
#include "graph/plan_internal.h"

#include "loom/nn/layer.h"

namespace loom {

// The cached plan lives in its output layer, which the plan's graph would otherwise own: a cycle
// that keeps both alive. The graph's handle of that layer is made non-owning (an aliasing
// shared_ptr with no owner); the layer outlives the plan it holds.
void GraphAccess::unown_output(Graph& g) {
  const nn::LayerImpl* out = g.outputs_.at(0).impl().get();
  const nn::Layer weak(std::shared_ptr<nn::LayerImpl>(std::shared_ptr<nn::LayerImpl>(), g.outputs_[0].impl().get()));
  for (nn::Layer& l : g.nodes_)
    if (l.impl().get() == out) l = weak;
  for (nn::Layer& l : g.outputs_)
    if (l.impl().get() == out) l = weak;
  for (nn::Layer& l : g.inputs_)
    if (l.impl().get() == out) l = weak;
}

}  // namespace loom

namespace loom::nn {

Tensor Layer::operator()() const {
  if (!impl_) throw ValueError("Layer::operator(): the layer is undefined (default-constructed)");
  if (!bound())
    throw ValueError("Layer::operator(): " + std::string(kind()) + " '" + name() +
                     "' was made without an input and has not been called yet, so there is no graph to run: call it on its "
                     "input first (Layer h = " + name() + "(x)), or construct it with its input");
  const Layer l = node();
  LayerImpl::EvalCache& cache = l.impl()->eval_cache;
  std::shared_ptr<const Plan> plan;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    plan = std::static_pointer_cast<const Plan>(cache.plan);
  }
  if (!plan) {
    Graph g = GraphAccess::build({l}, {}, false);  // l() never required unique names
    GraphAccess::unown_output(g);
    auto built = std::make_shared<const Plan>(std::move(g));
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (!cache.plan) cache.plan = built;
    plan = std::static_pointer_cast<const Plan>(cache.plan);
  }
  return plan->run()[0];
}

}  // namespace loom::nn
