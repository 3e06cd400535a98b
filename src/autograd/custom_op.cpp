// Custom ops (loom/autograd/custom_op.h): the forward under NoGrad, the backward recorded
// through ops' detail::record as one node. A node has one output; several differentiable
// outputs are tied to one node through a hidden float64 tensor holding all of them flattened
// (a stride-0 view, never read): each output's node passes its gradient into its slot there,
// the engine sums the slots, and the hidden node splits them again and runs the backward once.
#include "loom/autograd/custom_op.h"

#include <memory>
#include <mutex>
#include <set>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "ops/internal.h"

namespace loom {

namespace {

// Nodes keep their op's name as a C string for their lifetime: custom ops' names are kept here
// (set elements do not move), one copy per distinct name.
const char* intern(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

std::string op_label(const std::string& name) { return "custom op '" + name + "'"; }

// What the recorded backward needs of one application.
struct Recorded {
  std::string name;
  CustomBackward backward;
  std::vector<detail::SavedTensor> saved;
  std::vector<bool> needs;                       // per input
  std::vector<Shape> in_shapes;                  // per input (defined ones)
  std::vector<size_t> recorded;                  // the inputs given to the node: their indices
  std::vector<Shape> out_shapes;                 // per output
  std::vector<DType> out_dtypes;                 // per output
  std::vector<bool> out_diff;                    // per output: floating (carries history)

  // The inputs' gradients, in the order of `recorded`, from one gradient per output.
  std::vector<Tensor> run(std::vector<Tensor> output_grads) const {
    CustomGrad g;
    for (size_t k = 0; k < output_grads.size(); ++k)
      if (out_diff[k] && !output_grads[k].defined()) output_grads[k] = zeros(out_shapes[k], out_dtypes[k]);
    g.output_grads = std::move(output_grads);
    for (const auto& s : saved) g.saved.push_back(s.get());
    g.needs_input_grad = needs;
    std::vector<Tensor> gs = backward(g);
    const std::string label = op_label(name);
    if (gs.size() != needs.size())
      throw AutogradError(label + ": its backward returned " + std::to_string(gs.size()) + " gradient" +
                          (gs.size() == 1 ? "" : "s") + " for " + std::to_string(needs.size()) + " input" +
                          (needs.size() == 1 ? "" : "s") +
                          " (one per input, an undefined Tensor for an input that needs none)");
    std::vector<Tensor> out;
    for (size_t i : recorded) {
      Tensor gi = needs[i] ? gs[i] : Tensor();
      if (gi.defined()) {
        if (gi.shape() != in_shapes[i])
          throw ShapeError(label + ": its backward returned a gradient of shape " + shape_str(gi.shape()) +
                           " for input " + std::to_string(i) + " of shape " + shape_str(in_shapes[i]) +
                           " (a gradient has its input's shape)");
        if (!is_floating(gi.dtype()))
          throw DTypeError(label + ": its backward returned a gradient of dtype " + dtype_name(gi.dtype()) +
                           " for input " + std::to_string(i) + " (valid: a floating dtype)");
      }
      out.push_back(gi);
    }
    return out;
  }
};

// The forward under NoGrad, its outputs checked: at least one, each defined.
std::vector<Tensor> run_forward(const std::string& label, const CustomForward& forward, const std::vector<Tensor>& inputs,
                                std::vector<Tensor>& saved) {
  std::vector<Tensor> outs;
  {
    NoGrad off;
    outs = forward(inputs, saved);
  }
  if (outs.empty()) throw ValueError(label + ": its forward returned no outputs (at least one)");
  for (size_t k = 0; k < outs.size(); ++k)
    if (!outs[k].defined()) throw ValueError(label + ": its forward returned an undefined tensor as output " + std::to_string(k));
  return outs;
}

bool records_history(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

// What the backward of this application needs; `node_inputs` gets the defined inputs, which
// the node is recorded on.
std::shared_ptr<Recorded> record_of(const std::string& name, const CustomBackward& backward, const std::vector<Tensor>& inputs,
                                    const std::vector<Tensor>& saved, const std::vector<Tensor>& outs, std::vector<Tensor>& node_inputs) {
  auto rec = std::make_shared<Recorded>();
  rec->name = name;
  rec->backward = backward;
  for (const Tensor& s : saved) rec->saved.emplace_back(s);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    rec->needs.push_back(t.defined() && t.requires_grad());
    rec->in_shapes.push_back(t.defined() ? t.shape() : Shape{});
    if (t.defined()) {
      rec->recorded.push_back(i);
      node_inputs.push_back(t);
    }
  }
  for (const Tensor& o : outs) {
    rec->out_shapes.push_back(o.shape());
    rec->out_dtypes.push_back(o.dtype());
    rec->out_diff.push_back(is_floating(o.dtype()));
  }
  return rec;
}

// One differentiable output, k: one node, the output's.
void record_one_output(const char* op, const std::shared_ptr<Recorded>& rec, const std::vector<Tensor>& node_inputs,
                       std::vector<Tensor>& outs, size_t k) {
  const size_t n_out = outs.size();
  outs[k] = detail::record(op, node_inputs, outs[k], [rec, k, n_out](const Tensor& g) {
    std::vector<Tensor> grads(n_out);
    grads[k] = g;
    return rec->run(std::move(grads));
  });
}

// Several differentiable outputs (`diff`): the hidden tensor of all of them, flattened, in
// float64, recorded on the inputs; each output's node passes its gradient into its slot.
void record_outputs(const char* op, const std::shared_ptr<Recorded>& rec, const std::vector<Tensor>& node_inputs,
                    std::vector<Tensor>& outs, const std::vector<size_t>& diff) {
  const size_t n_out = outs.size();
  std::vector<int64_t> offset(n_out, 0);
  int64_t total = 0;
  for (size_t k : diff) {
    offset[k] = total;
    total += outs[k].numel();
  }
  Tensor hidden = detail::broadcast_view(zeros({1}, DType::Float64), Shape{total});
  hidden = detail::record(op, node_inputs, hidden, [rec, offset, n_out](const Tensor& packed) {
    std::vector<Tensor> grads(n_out);
    for (size_t k = 0; k < n_out; ++k) {
      if (!rec->out_diff[k]) continue;
      int64_t n = 1;
      for (int64_t d : rec->out_shapes[k]) n *= d;
      grads[k] = astype(reshape(slice(packed, 0, offset[k], offset[k] + n), rec->out_shapes[k]), rec->out_dtypes[k]);
    }
    return rec->run(std::move(grads));
  });
  for (size_t k : diff) {
    const int64_t at = offset[k], n = outs[k].numel();
    outs[k] = detail::record(op, {hidden}, outs[k], [at, n, total](const Tensor& g) {
      Tensor packed = zeros({total}, DType::Float64);
      Tensor part = slice(packed, 0, at, at + n);
      part.copy_(reshape(g, {n}));
      return std::vector<Tensor>{packed};
    });
  }
}

}  // namespace

std::vector<Tensor> CustomOp::operator()(const std::vector<Tensor>& inputs) const {
  const std::string label = op_label(name);
  if (!forward) throw ValueError(label + ": no forward function");
  if (!backward) throw ValueError(label + ": no backward function");
  const bool record = records_history(inputs);
  std::vector<Tensor> saved;
  std::vector<Tensor> outs = run_forward(label, forward, inputs, saved);
  if (!record) return outs;
  std::vector<size_t> diff;  // the outputs that carry history: the floating ones
  for (size_t k = 0; k < outs.size(); ++k)
    if (is_floating(outs[k].dtype())) diff.push_back(k);
  if (diff.empty()) return outs;
  std::vector<Tensor> node_inputs;
  const std::shared_ptr<Recorded> rec = record_of(name, backward, inputs, saved, outs, node_inputs);
  if (diff.size() == 1) record_one_output(intern(name), rec, node_inputs, outs, diff[0]);
  else record_outputs(intern(name), rec, node_inputs, outs, diff);
  return outs;
}

}  // namespace loom
