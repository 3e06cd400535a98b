#pragma once
// The built-in kinds' registration calls, one per source file that defines kinds; called in
// order by nn::register_layers (src/nn/registry.cpp).
#include "loom/nn/registry.h"

namespace loom::nn::detail {

// Each built-in kind is added with its KindInfo (nn/registry.h): its options' defaults, from its
// attributes struct where it has one.
using AddKind = void (*)(const std::string& kind, LayerFactory factory, KindInfo info);

void register_input_layers(AddKind add);          // nn/input.cpp
void register_linear_layers(AddKind add);         // nn/linear.cpp
void register_activation_layers(AddKind add);     // nn/activation.cpp
void register_dropout_layers(AddKind add);        // nn/dropout.cpp
void register_merge_layers(AddKind add);          // nn/merge.cpp
void register_shape_layers(AddKind add);          // nn/shape.cpp
void register_embedding_layers(AddKind add);      // nn/embedding.cpp
void register_conv_layers(AddKind add);           // nn/conv.cpp
void register_pooling_layers(AddKind add);        // nn/pooling.cpp
void register_normalization_layers(AddKind add);  // nn/normalization.cpp
void register_recurrent_layers(AddKind add);      // nn/recurrent.cpp
void register_attention_layers(AddKind add);      // nn/attention.cpp
void register_feed_forward_layers(AddKind add);   // nn/feed_forward.cpp
void register_decoder_blocks(AddKind add);        // nn/decoder_block.cpp
void register_sparse_layers(AddKind add);         // nn/sparse.cpp
void register_module_layer(AddKind add);          // graph/module.cpp

}  // namespace loom::nn::detail
