// Pass "peak memory".
#include <algorithm>

#include "graph/plan_impl.h"
#include "loom/graph/module.h"

namespace loom {

using nn::Layer;

void measure_peak_memory(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<bool>& is_input = c.is_input;
  // peak bytes of live activations: inputs (their owners keep them during the run), then
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
  for (const Compilation::Step& s : p->steps) {
    // a Constant or a free Input hands out the tensor it holds: nothing new is allocated
    // (nor does a step done by its elementwise chain, which writes only the chain's output)
    const bool holds = is_source(nodes[s.node]) || s.is<ChainedStep>();
    const int64_t out = holds ? 0 : bytes(s.node);
    int64_t during = out;
    if (const Graph* inner = nn::module_graph(nodes[s.node]); inner && known) {
      std::vector<Shape> in_shapes;
      int64_t in_bytes = 0;
      for (size_t a : s.args) {
        in_shapes.push_back(p->shapes[a][std::min(c.pick(s.node), p->shapes[a].size() - 1)]);
        in_bytes += bytes_of(in_shapes.back(), nodes[a].dtype());
      }
      const Plan inner_plan(*inner, CompileOptions{in_shapes});
      if (inner_plan.peak_bytes() >= 0) during = std::max(during, inner_plan.peak_bytes() - in_bytes);
    }
    if (live_bytes + during > peak) peak = live_bytes + during, p->peak_at = "step " + label(nodes[s.node]);
    live_bytes += out;
    for (size_t f : s.frees)
      if (!is_input_slot[f] && !is_source(nodes[f])) live_bytes -= bytes(f);
  }
  p->peak = known ? peak : -1;
  c.note(known ? "peak   " + std::to_string(peak) + " bytes of live activations, at " + p->peak_at
               : std::string("peak   unknown: some shape is open"));
}

}  // namespace loom
