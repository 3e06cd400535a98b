#pragma once
// An initializer as a layer option (Linear, Lookup).
#include "loom/nn/init.h"
#include "loom/nn/options.h"

namespace loom::nn::detail {

inline Options init_options(const Init& init) { return Options::from_json(init.to_json(), "Init"); }

inline Init init_from(const Options& layer, const std::string& key) {
  const Options o = layer.get_object(key);
  return Init::from_name(o.get_string("kind"), o.has("a") ? o.get_float("a") : 0.0, o.has("b") ? o.get_float("b") : 0.0);
}

}  // namespace loom::nn::detail
