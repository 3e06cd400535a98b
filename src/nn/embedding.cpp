#include "loom/nn/embedding.h"

#include "nn/init_options.h"
#include "nn/kind_util.h"
#include "nn/options_json.h"
#include "nn/register_kinds.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"

namespace loom::nn {

using detail::kMaxSize;
using detail::require_input;

namespace {

struct OneHotImpl final : LayerBase<OneHotImpl> {
  bool pure() const override { return true; }
  int64_t n_classes = 0;
  const char* kind() const override { return "OneHot"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Tensor classes = arange(n_classes, DType::Int64, in[0].device());
    return astype(equal(expand_dims(astype(in[0], DType::Int64), -1), classes), dtype);
  }
  Options options() const override { return Options().set_int("n_classes", n_classes).set_string("dtype", dtype_name(dtype)); }
};

struct LookupImpl final : LayerBase<LookupImpl> {
  bool pure() const override { return true; }
  int64_t vocab = 0, n_units = 0, padding_id = -1;
  Init init;
  const char* kind() const override { return "Lookup"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return embedding(state->param("weights"), in[0], padding_id);
  }
  Options options() const override {
    return Options()
        .set_int("vocab_size", vocab)
        .set_int("n_units", n_units)
        .set_int("padding_id", padding_id)
        .set_object("init", detail::init_options(init));
  }
};

}  // namespace

OneHot::OneHot(const Layer& ids, int64_t n_classes, DType dtype, const std::string& name) {
  require_input(ids, "OneHot");
  if (n_classes <= 0) throw ValueError("OneHot: n_classes must be positive, got " + std::to_string(n_classes));
  if (!is_integral(ids.dtype()))
    throw DTypeError("OneHot: ids '" + ids.name() + "' have dtype " + dtype_name(ids.dtype()) + " (valid: an integer dtype)");
  auto impl = std::make_shared<OneHotImpl>();
  impl->n_classes = n_classes;
  impl->inputs = {ids};
  impl->shape = ids.shape();
  impl->shape.push_back(n_classes);
  impl->dtype = dtype;
  impl->name = unique_name("one_hot", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Lookup::Lookup(const Layer& ids, int64_t vocab_size, int64_t n_units, LookupOptions o, const std::string& name) {
  require_input(ids, "Lookup");
  if (!is_integral(ids.dtype()))
    throw DTypeError("Lookup: ids '" + ids.name() + "' have dtype " + dtype_name(ids.dtype()) + " (valid: an integer dtype)");
  if (vocab_size <= 0 || n_units <= 0)
    throw ValueError("Lookup: vocab_size and n_units must be positive, got " + std::to_string(vocab_size) + " and " + std::to_string(n_units));
  if (o.padding_id >= vocab_size)
    throw ValueError("Lookup: padding_id " + std::to_string(o.padding_id) + " is outside the vocabulary of " + std::to_string(vocab_size));
  auto impl = std::make_shared<LookupImpl>();
  impl->vocab = vocab_size;
  impl->n_units = n_units;
  impl->padding_id = o.padding_id;
  impl->init = o.init;
  impl->inputs = {ids};
  impl->shape = ids.shape();
  impl->shape.push_back(n_units);
  impl->dtype = DType::Float32;
  impl->name = unique_name("lookup", name);
  Tensor table = initialize(o.init, {vocab_size, n_units});
  if (o.padding_id >= 0) table.index_put_({o.padding_id}, 0.0);
  impl->state->add_param("weights", table.requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_embedding_layers(AddKind add) {
  add("OneHot", [](const LayerSpec& s) -> Layer {
    return OneHot(s.input(), s.options.get_int("n_classes", 1, kMaxSize), dtype_option(s.options, "dtype"), s.name);
  });
  add("Lookup", [](const LayerSpec& s) -> Layer {
    LookupOptions o;
    o.padding_id = s.options.get_int("padding_id", -1, kMaxSize);
    o.init = init_from(s.options, "init");
    return Lookup(s.input(), s.options.get_int("vocab_size", 1, kMaxSize), s.options.get_int("n_units", 1, kMaxSize), o, s.name);
  });
}

}  // namespace loom::nn
