#pragma once
// The built-in kinds' registration calls, one per source file that defines kinds; called in
// order by nn::register_layers (src/nn/registry.cpp).
#include "loom/nn/registry.h"

namespace loom::nn::detail {

using AddKind = void (*)(const std::string& kind, LayerFactory factory);

void register_basic_layers(AddKind add);        // nn/layers.cpp
void register_shape_layers(AddKind add);        // nn/shape_layers.cpp
void register_conv_layers(AddKind add);         // nn/conv_layers.cpp
void register_adaptive_pool_layers(AddKind add);  // nn/adaptive_pool.cpp
void register_recurrent_layers(AddKind add);    // nn/recurrent.cpp
void register_attention_layers(AddKind add);    // nn/attention_layers.cpp
void register_sparse_layers(AddKind add);       // nn/sparse_layers.cpp
void register_module_layer(AddKind add);        // graph/module.cpp

}  // namespace loom::nn::detail
