#include "loom/nn/dropout.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/creation.h"
#include "loom/ops/nn.h"
#include "loom/ops/random.h"

namespace loom::nn {

using detail::fmt_double;
using detail::param_impl;
using detail::ParamData;
using detail::require_input;

namespace {

// ---------------------------------------------------------------- Dropout
struct DropoutImpl final : KindBase<DropoutImpl, DropoutAttributes> {
  std::shared_ptr<ParamData> param;  // when the probability is a Param
  const char* kind() const override { return "Dropout"; }
  double p() const { return param ? param->value : attrs.probability; }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override {
    if (mode != Mode::Train) return in[0];
    // the stream position lives in the state (buffer "rng": seed, draws) so that checkpoints
    // carry it and a resumed run draws the same masks
    Tensor& rng = state->buffer("rng");
    int64_t* s = rng.data<int64_t>();
    Generator g;
    g.set_state(static_cast<uint64_t>(s[0]), static_cast<uint64_t>(s[1]));
    Tensor y = dropout(in[0], p(), true, &g);
    s[1] = static_cast<int64_t>(g.counter());
    return y;
  }
  // saved with the probability of the moment (a Param's current value)
  Options options() const override {
    DropoutAttributes now = attrs;
    now.probability = p();
    return write_attributes(now);
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
};

}  // namespace

Dropout::Dropout(double p, uint64_t seed, const std::string& name)
    : Layer(unbound_layer("Dropout", [p, seed](const LayerSpec& s) -> Layer { return Dropout(s.input(), p, seed, s.name); }, name)) {
  if (!(p >= 0 && p <= 1)) throw ValueError("Dropout: probability must be in [0, 1], got " + fmt_double(p));
}

Dropout::Dropout(const Layer& input, double probability, uint64_t seed, const std::string& name) {
  require_input(input, "Dropout");
  if (!(probability >= 0 && probability <= 1))
    throw ValueError("Dropout: probability must be in [0, 1], got " + fmt_double(probability));
  auto impl = std::make_shared<DropoutImpl>();
  impl->attrs = {probability, seed};
  impl->state->add_buffer("rng", from_vector<int64_t>({static_cast<int64_t>(seed), 0}, {2}));
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("dropout", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Dropout::Dropout(const Layer& input, const Param& probability, uint64_t seed, const std::string& name)
    : Dropout(input, probability.value(), seed, name) {
  static_cast<DropoutImpl&>(*impl()).param = param_impl(probability).data;
}

void detail::register_dropout_layers(AddKind add) {
  add("Dropout", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<DropoutAttributes>(s.options);
    return Dropout(s.input(), a.probability, a.seed, s.name);
  }, {write_attributes(DropoutAttributes{})});
}

}  // namespace loom::nn
