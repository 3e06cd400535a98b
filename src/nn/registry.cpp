#include "loom/nn/registry.h"

#include <map>
#include <mutex>

#include "nn/register_kinds.h"

namespace loom::nn {

namespace {

struct Kind {
  LayerFactory factory;
  KindInfo info;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, Kind> kinds;
};

Registry& raw_registry() {
  static Registry r;
  return r;
}

void add(const std::string& kind, LayerFactory factory, KindInfo info) {
  if (kind.empty()) throw ValueError("register_layer_kind: the kind name is empty");
  if (!factory) throw ValueError("register_layer_kind: kind '" + kind + "' has an empty factory");
  Registry& r = raw_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.kinds.emplace(kind, Kind{std::move(factory), std::move(info)}).second)
    throw ValueError("register_layer_kind: kind '" + kind + "' is already registered (kind names must be unique)");
}

// The registry with the built-in kinds in it.
Registry& registry() {
  register_layers();
  return raw_registry();
}

std::string kind_list(const Registry& r) {
  std::string s;
  for (const auto& [k, f] : r.kinds) s += (s.empty() ? "" : ", ") + k;
  return s;
}

}  // namespace

void register_layers() {
  static std::once_flag once;
  std::call_once(once, [] {
    detail::register_input_layers(add);
    detail::register_linear_layers(add);
    detail::register_activation_layers(add);
    detail::register_dropout_layers(add);
    detail::register_merge_layers(add);
    detail::register_shape_layers(add);
    detail::register_embedding_layers(add);
    detail::register_conv_layers(add);
    detail::register_pooling_layers(add);
    detail::register_normalization_layers(add);
    detail::register_recurrent_layers(add);
    detail::register_attention_layers(add);
    detail::register_feed_forward_layers(add);
    detail::register_decoder_blocks(add);
    detail::register_sparse_layers(add);
    detail::register_module_layer(add);
  });
}

void register_layer_kind(const std::string& kind, LayerFactory factory, KindInfo info) {
  registry();
  add(kind, std::move(factory), std::move(info));
}

bool is_layer_kind_registered(const std::string& kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.kinds.count(kind) > 0;
}

std::vector<std::string> registered_layer_kinds() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [k, f] : r.kinds) out.push_back(k);
  return out;
}

KindInfo layer_kind_info(const std::string& kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.kinds.find(kind);
  if (it == r.kinds.end()) throw ValueError("layer_kind_info: unknown kind '" + kind + "' (registered kinds: " + kind_list(r) + ")");
  return it->second.info;
}

Layer make_layer(const std::string& kind, const LayerSpec& spec) {
  Registry& r = registry();
  LayerFactory factory;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.kinds.find(kind);
    if (it == r.kinds.end())
      throw ValueError(spec.options.where() + " has unknown kind '" + kind + "' (registered kinds: " + kind_list(r) +
                       "; register a user-defined kind with nn::register_layer_kind, a Lambda's kind with nn::register_lambda_kind, "
                       "before loading)");
    factory = it->second.factory;
  }
  return factory(spec);
}

const Layer& LayerSpec::input() const {
  expect_inputs(1, 1);
  return inputs[0];
}

void LayerSpec::expect_inputs(size_t lo, size_t hi) const {
  if (inputs.size() >= lo && inputs.size() <= hi) return;
  const std::string want = lo == hi ? std::to_string(lo) : "between " + std::to_string(lo) + " and " + std::to_string(hi);
  options.fail("needs " + want + " input" + (hi == 1 ? "" : "s") + ", got " + std::to_string(inputs.size()));
}

}  // namespace loom::nn
