#pragma once
// int8 checkpoints of the zoo's language models (docs/text.md, "int8 checkpoints"): the linear
// maps of the blocks and the head written as I8 values with F32 scales beside them, and read
// back as they are. Private to io: hf_checkpoint.cpp calls these on the state dict it writes and
// reads.
#include <cstdint>
#include <set>
#include <string>

#include "loom/io/safetensors.h"
#include "loom/zoo/architectures.h"

namespace loom::io::int8_files {

// The suffix of a scale's key: "<weight key>_scale" ("...c_attn.weight_scale").
inline constexpr const char* kScaleSuffix = "_scale";

// config.json's quantization_config.quant_method of an int8 folder.
inline constexpr const char* kInt8QuantMethod = "loom_int8";

// Replaces, in `state` (the float state dict save_hf_checkpoint writes), the weight of every
// linear map of the blocks and the head by its int8 values (UInt8 bytes, (out, in)), named in
// `int8`, and adds its F32 scales (out, groups): the network's own int8 forms when it has them,
// else quantize_int8 of its float weights per group of `group` inputs. The head's is written even
// when tied (lm_head.weight). Returns the group config.json records.
int64_t put_int8_weights(const zoo::Network& net, int64_t group, TensorMap& state, std::set<std::string>& int8);

// The reverse, on the state dict read from an int8 folder whose config.json records `group`:
// each linear map's int8 values and scales are checked (I8 and F32, shapes, values in -127..127,
// scales finite and >= 0), kept in net.int8 as they are, and replaced in `state` by their
// dequantized float32 weights, in the layout of the float checkpoint, so that the float loader
// fills the graph from `state` as it would. HfCheckpointError naming the key otherwise; also for an
// int8 tensor in a folder without quantization_config (quantized = false) or a scale without
// its weight.
void take_int8_weights(const std::string& dir, zoo::Network& net, bool quantized, int64_t group, TensorMap& state,
                       const std::set<std::string>& int8);

}  // namespace loom::io::int8_files
