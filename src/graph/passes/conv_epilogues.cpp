// Pass "conv epilogues" (CompileOptions::fuse_conv_epilogues).
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

namespace {

// What the fused convolution needs from the group's layers' attributes, read once here.
FusedGeometry fused_geometry(const nn::ConvAttributes& conv, const nn::BatchNormOptions* bn) {
  FusedGeometry g;
  g.stride = conv.stride;
  g.dilation = conv.dilation;
  g.padding = conv.padding;
  g.groups = conv.groups;
  g.conv_bias = conv.bias;
  if (bn) {
    g.bn_affine = bn->affine;
    g.bn_eps = bn->eps;
  }
  return g;
}

}  // namespace

void fuse_conv_epilogues(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<size_t>& readers = c.readers;
  const std::vector<size_t>& step_of = c.step_of;
  const std::vector<bool>& is_out = c.is_out;
  // inference epilogues (Eval mode): Conv2D -> [BatchNorm] -> [Add residual] -> [ReLU], each
  // link read by nothing but the next one, runs as one convolution (ops/conv_fused.h). The
  // residual must be computed before the convolution's step, and of its output's shape.
  // the one step reading slot k, when k is read once and is no output
  auto sole_reader = [&](size_t k) -> const Compilation::Step* {
    if (readers[k] != 1 || is_out[k]) return nullptr;
    for (const Compilation::Step& s : p->steps)
      if (std::find(s.args.begin(), s.args.end(), k) != s.args.end()) return &s;
    return nullptr;
  };
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Compilation::Step& conv = p->steps[i];
    const Layer& cl = nodes[conv.node];
    const nn::ConvAttributes* conv_attrs = conv2d_of(cl);
    if (!conv.is<LayerStep>() || !conv_attrs || conv.args.size() != 1 || cl.dtype() != DType::Float32 || c.pick(conv.node) != 0) continue;
    size_t end = conv.node, bn = SIZE_MAX, residual = SIZE_MAX;
    bool relu = false;
    std::vector<size_t> members;
    std::string text = label(cl);
    const Compilation::Step* next = sole_reader(end);
    if (next && batch_norm_of(nodes[next->node]) && next->args.size() == 1) {
      bn = end = next->node;
      members.push_back(bn);
      text += " + " + label(nodes[bn]);
      next = sole_reader(end);
    }
    if (next && is_merge(nodes[next->node], nn::MergeMode::Sum) && next->args.size() == 2) {
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
    if (next && is_activation(nodes[next->node], nn::relu)) {
      relu = true;
      end = next->node;
      members.push_back(end);
      text += " + " + label(nodes[end]);
    }
    if (members.empty()) continue;
    conv.action = ConvGroupStep{.out = end, .bn = bn, .residual = residual, .relu = relu,
                                .geometry = fused_geometry(*conv_attrs, bn == SIZE_MAX ? nullptr : batch_norm_of(nodes[bn]))};
    for (size_t m : members) p->steps[step_of[m]].action = ConvMemberStep{};
    c.note("fuse   " + text + " (Eval mode: one convolution, batch norm folded, post-ops)");
  }
}

}  // namespace loom
