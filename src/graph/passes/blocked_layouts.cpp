// Pass "blocked layouts" (CompileOptions::blocked_layouts, with fuse_conv_epilogues).
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void keep_blocked_layouts(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  const std::vector<Layer>& nodes = c.nodes;
  const size_t n = c.n;
  const std::vector<size_t>& readers = c.readers;
  const std::vector<bool>& is_out = c.is_out;
  // blocked layouts (Eval mode, no gradients): a fused group's output whose every reader is
  // a fused convolution (as its input or its residual; groups 1) and that is no graph output
  // stays in the layout the convolutions compute in (oneDNN's nChw8c / nChw16c) rather than
  // being converted to NCHW after one and back before the next. Whether it does is decided per
  // run from the shapes (channels a multiple of the block; conv_fused.h).
  std::vector<size_t> capable(n, 0);  // the reads of each slot that a fused convolution makes
  std::vector<std::string> by(n);
  for (const Compilation::Step& s : p->steps) {
    const ConvGroupStep* group = s.as<ConvGroupStep>();
    if (!group || group->geometry.groups != 1) continue;
    for (size_t a : {s.args[0], group->residual}) {
      if (a == SIZE_MAX) continue;
      ++capable[a];
      by[a] += (by[a].empty() ? "" : ", ") + label(nodes[s.node]);
    }
  }
  // a MaxPool2D whose output only fused convolutions read can read and write blocked: it is
  // then a capable reader of its input
  for (Compilation::Step& s : p->steps) {
    const Layer& l = nodes[s.node];
    const size_t k = s.node;
    const nn::PoolAttributes* pool = max_pool2d_of(l);
    if (!pool || !s.is<LayerStep>() || l.dtype() != DType::Float32 || s.args.size() != 1 || is_out[k] || readers[k] == 0 ||
        capable[k] != readers[k])
      continue;
    s.action = BlockedPoolStep{pool->kernel_size, pool->stride, pool->padding, pool->ceil_mode};
    ++capable[s.args[0]];
    by[s.args[0]] += (by[s.args[0]].empty() ? "" : ", ") + label(l);
    c.note("block  " + label(l) + " pools in the convolutions' blocked layout (read only by fused " + by[k] + ")");
  }
  for (Compilation::Step& s : p->steps) {
    ConvGroupStep* group = s.as<ConvGroupStep>();
    if (!group) continue;
    const size_t k = group->out;
    if (group->geometry.groups != 1 || is_out[k] || readers[k] == 0 || capable[k] != readers[k]) continue;
    group->keep_blocked = true;
    c.note("block  " + label(nodes[k]) + " stays in the convolutions' blocked layout (read only by fused " +
                       by[k] + ")");
  }
}

}  // namespace loom
