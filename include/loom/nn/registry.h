#pragma once
// The layer-kind registry: kind name -> factory that rebuilds a layer from its inputs and
// options (the inverse of LayerImpl::options). graph_from_json / load_model look kinds up here,
// so a user-defined kind saves and loads as the built-in ones do once it is registered
// (docs/layers.md, "Writing a layer"). The built-in kinds are registered by register_layers(),
// called on the registry's first use; there is no static-initialisation registration.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/api.h"
#include "loom/nn/layer.h"
#include "loom/nn/options.h"

namespace loom::nn {

// What a factory gets: the layer's saved name, its (already rebuilt) inputs, its options, and
// the parameters it shares with a layer loaded before it (tied weights), by parameter name.
struct LOOM_API LayerSpec {
  std::string name;
  std::vector<Layer> inputs;
  Options options;
  std::vector<std::pair<std::string, Tensor>> tied;
  // The one input; ValueError naming the layer when there is not exactly one.
  const Layer& input() const;
  // Throws ValueError naming the layer unless it has between lo and hi inputs.
  void expect_inputs(size_t lo, size_t hi) const;
};

using LayerFactory = std::function<Layer(const LayerSpec&)>;

// What a kind declares besides its factory, for code that builds layers from keyword arguments
// without knowing the kind (the Python module's loom.layers): every option its factory reads,
// each with its default value (a kind on KindBase<Impl, A>: write_attributes(A{})), so that the
// caller knows the keys, fills those it is not given and converts values to the defaults' JSON
// types; and whether the kind takes no input layers (Input, Constant, Param, SparseInput).
// A field without a usable default (Linear's n_units is 0) is still listed: the factory's own
// range check names it when the caller does not give it.
struct LOOM_API KindInfo {
  Options defaults;
  bool source = false;
};

// Registers `kind` (the name LayerImpl::kind() returns). Throws ValueError for an empty name, an
// empty factory, or a kind already registered (built-in kinds included). Thread-safe.
LOOM_API void register_layer_kind(const std::string& kind, LayerFactory factory, KindInfo info = {});
LOOM_API bool is_layer_kind_registered(const std::string& kind);
// What `kind` was registered with (an empty KindInfo for a kind registered without one);
// ValueError naming the registered kinds for an unknown one.
LOOM_API KindInfo layer_kind_info(const std::string& kind);
// Every registered kind, sorted.
LOOM_API std::vector<std::string> registered_layer_kinds();
// Builds a layer of a registered kind; ValueError naming the registered kinds otherwise.
LOOM_API Layer make_layer(const std::string& kind, const LayerSpec& spec);

// A layer made without input, Keras style (nn::Linear dense(128) is one): `factory` builds the
// layer of kind `kind` named `name` (generated from the kind when empty) on the inputs of its
// first call, dense(x); later calls are reuse_with, sharing that layer's state. Until the first
// call its shape, state, parameters, ... throw ValueError naming the layer.
LOOM_API Layer unbound_layer(const std::string& kind, LayerFactory factory, const std::string& name = "");
// The same for any registered kind, built by its registered factory from `options` (what the
// kind's LayerImpl::options() writes): a user-defined kind gets the call form with no code.
LOOM_API Layer unbound_layer(const std::string& kind, const Options& options, const std::string& name = "");

// Registers the built-in kinds (once; later calls do nothing).
LOOM_API void register_layers();

}  // namespace loom::nn
