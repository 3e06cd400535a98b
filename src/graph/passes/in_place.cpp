// Pass "in place".
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void write_in_place(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  // in place: a fused convolution's residual that no later step reads (its last reader is
  // the group's Add, done by the convolution) is handed to it, which then writes its output into
  // the residual's buffer when nothing else holds it (conv_fused.h): no copy, no new block
  for (size_t i = 0; i < p->steps.size(); ++i) {
    ConvGroupStep* conv = p->steps[i].as<ConvGroupStep>();
    if (!conv || conv->residual == SIZE_MAX) continue;
    const size_t residual = conv->residual;
    auto reads = [&](const std::vector<size_t>& v) { return std::find(v.begin(), v.end(), residual) != v.end(); };
    size_t freed_at = SIZE_MAX;
    for (size_t k = i; k < p->steps.size() && freed_at == SIZE_MAX; ++k)
      if (reads(p->steps[k].frees)) freed_at = k;
    bool read_between = false;
    for (size_t k = i + 1; k < freed_at && k < p->steps.size(); ++k) {
      const Compilation::Step& o = p->steps[k];
      const ChainStep* chain = o.as<ChainStep>();
      read_between = read_between || reads(o.args) || (chain && reads(chain->inputs));
    }
    // the freeing step, the one reader after this step, is then the group's own Add (it comes
    // after the convolution and reads the residual), which runs as part of this step
    conv->residual_dies = freed_at != SIZE_MAX && !read_between && p->steps[freed_at].is<ConvMemberStep>() &&
                          reads(p->steps[freed_at].args);
  }
}

}  // namespace loom
