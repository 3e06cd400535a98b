// Pass "shapes": every node's output shape(s), declared or, for given input shapes, by each kind's
// shape rule (LayerImpl::output_shapes) in graph order. Nothing runs.
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void infer_shapes(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  const CompileOptions& opt = c.opt;
  const Graph& g = c.g;
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<std::vector<size_t>>& args = c.args;
  const size_t n = c.n;
  const std::vector<bool>& is_input = c.is_input;
  const std::vector<std::vector<Shape>>& declared = c.declared;
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
    size_t changed = 0;
    for (size_t k = 0; k < n; ++k) {
      if (is_input[k] || args[k].empty()) continue;
      std::vector<Shape> in;
      std::string in_text;
      for (size_t a : args[k]) {
        in.push_back(p->shapes[a][std::min(c.pick(k), p->shapes[a].size() - 1)]);
        in_text += (in_text.empty() ? "" : ", ") + shape_str(in.back());
      }
      // an error names the node and the shapes it was given
      try {
        const std::vector<Shape> rule = nodes[k].impl()->output_shapes(in);
        if (rule != p->shapes[k]) ++changed;
        p->shapes[k] = rule;
      } catch (const ShapeError& e) {
        throw ShapeError("compile: " + label(nodes[k]) + " cannot take inputs of shape " + in_text + " (from the given input shapes): " + e.what());
      } catch (const ValueError& e) {
        throw ValueError("compile: " + label(nodes[k]) + " cannot take inputs of shape " + in_text + " (from the given input shapes): " + e.what());
      }
    }
    c.note("shapes " + std::to_string(changed) + " node(s) sized by their kinds' shape rules for the input shapes given");
  }
}

}  // namespace loom
