// L1 / L2 weight penalties over chosen parameters or layers.
#include "loom/train/regularizers.h"

#include <set>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduction.h"

namespace loom::train {

namespace {

enum class Kind { L1, L2 };

Tensor penalty(const std::vector<Tensor>& params, double coef, Kind kind) {
  Tensor total;
  for (const Tensor& p : params) {
    if (!p.defined()) throw ValueError("penalty: a parameter is undefined");
    if (!is_floating(p.dtype()))
      throw DTypeError(std::string("penalty: parameters must be floating, got ") + dtype_name(p.dtype()));
    Tensor s = sum(kind == Kind::L1 ? abs(p) : square(p));
    total = total.defined() ? total + s : s;
  }
  if (!total.defined()) return zeros({}, DType::Float32);
  return total * coef;
}

}  // namespace

std::vector<Tensor> parameters(const std::vector<nn::Layer>& layers) {
  std::vector<Tensor> out;
  std::set<const TensorImpl*> seen;
  for (const nn::Layer& l : layers) {
    if (!l.defined()) throw ValueError("parameters: a layer is undefined");
    for (const Tensor& p : l.parameters())
      if (seen.insert(p.impl().get()).second) out.push_back(p);
  }
  return out;
}

Tensor l1_penalty(const std::vector<Tensor>& params, double coef) { return penalty(params, coef, Kind::L1); }
Tensor l2_penalty(const std::vector<Tensor>& params, double coef) { return penalty(params, coef, Kind::L2); }
Tensor l1_penalty(const std::vector<nn::Layer>& layers, double coef) { return l1_penalty(parameters(layers), coef); }
Tensor l2_penalty(const std::vector<nn::Layer>& layers, double coef) { return l2_penalty(parameters(layers), coef); }

Tensor Regularizer::operator()() const {
  Tensor r;
  if (l1_ != 0) r = l1_penalty(params_, l1_);
  if (l2_ != 0) r = r.defined() ? r + l2_penalty(params_, l2_) : l2_penalty(params_, l2_);
  return r.defined() ? r : zeros({}, DType::Float32);
}

}  // namespace loom::train
