#pragma once
// Hugging Face checkpoints of decoder-only language models: a folder as transformers'
// save_pretrained writes it (config.json, and model.safetensors or shards
// model-0000i-of-0000n.safetensors with model.safetensors.index.json) into the zoo's gpt and llama
// networks, and those networks back into such a folder. See docs/torch_weights.md.
//
// Reading is strict: config.json's model_type must be gpt2 or llama, every setting Loom's
// graph does not express is refused by name, every size is bounded and the files must hold
// the weights the config implies before anything is allocated, shard names from the index
// must stay inside the folder, and every tensor must be used exactly once with the expected
// shape (after GPT-2's c_attn is split into q, k and v). Weights in float32, bfloat16 or
// float16 are converted to float32.
#include <string>

#include "loom/core/api.h"
#include "loom/core/error.h"
#include "loom/io/torch_weights.h"
#include "loom/zoo/architectures.h"

namespace loom::io {

// What load_hf_checkpoint finds wrong with a folder: its config.json (an unknown model_type, a
// setting Loom does not model, a size out of range), its index (a shard outside the folder, a
// key in the wrong shard), or its weights (missing, unexpected, misshapen keys, each named).
class LOOM_API HfCheckpointError : public ValueError {
  using ValueError::ValueError;
};

// The map between transformers' state dict (GPT2LMHeadModel's, LlamaForCausalLM's) and a network
// made by zoo::gpt or zoo::llama: exact keys, Linear weights transposed (Llama's nn.Linear),
// GPT-2's Conv1D weights as they are ((in, out), Loom's layout), GPT-2's c_attn split into the
// attention's q, k and v. A tied lm_head has no rule (it is the embedding's table). ValueError
// for a network without a gpt or llama config.
LOOM_API TorchMap hf_torch_map(const zoo::Network& network);

// The network config.json describes, with the folder's weights loaded (float32). An int8 folder
// (config.json's quantization_config, below) loads its int8 values and scales as they are into
// the network's `int8` (no quantizing again), and their dequantized copies into the graph.
// HfCheckpointError as above, and for an int8 folder whose weights or scales are missing, of the
// wrong dtype or shape, or out of range; IOError for a file that cannot be read or is not valid
// safetensors.
LOOM_API zoo::Network load_hf_checkpoint(const std::string& dir);

struct LOOM_API HfSaveOptions {
  // Weight-only int8 (docs/text.md, "int8 checkpoints"): every linear map of the blocks and the
  // head as I8 values "<key>" (outputs, inputs) with F32 scales "<key>_scale" (outputs, groups),
  // and config.json's quantization_config {"quant_method": "loom_int8", "bits": 8, "group_size":
  // g, "symmetric": true}. The network's own int8 forms are written as they are when it has them
  // (zoo::Network::int8), else its float weights are quantized as quantize_int8 does, per output
  // (int8_group 0) or per group of int8_group inputs. transformers cannot read such a folder.
  bool int8 = false;
  int64_t int8_group = 0;
  // The floating weights' dtype in the files: Float32, or BFloat16 / Float16 (rounded to nearest
  // even from the network's float32, as torch's .to() does); config.json's torch_dtype names it.
  // int8 values and their float32 scales stay as they are.
  DType dtype = DType::Float32;
  // The largest shard in bytes: 0 writes one model.safetensors; more writes the weights in order
  // into model-00001-of-0000N.safetensors ... , each of at most this many bytes of tensors (a
  // tensor larger than it gets a file of its own), and model.safetensors.index.json (its
  // weight_map and metadata.total_size), as save_pretrained(max_shard_size) does.
  int64_t max_shard_bytes = 0;
};

// Writes `network` (zoo::gpt or zoo::llama) as transformers reads it with from_pretrained:
// dir/config.json and dir/model.safetensors (or its shards and their index; metadata format
// "pt"), the folder made if needed; in options.dtype; int8 with options.int8. The weights of an
// earlier checkpoint in the folder that this one does not use (model.safetensors beside an index,
// or shards and an index beside model.safetensors) are removed once the new files are written.
// ValueError for a network without a gpt or llama config, a negative int8_group (or one other
// than the network's own int8 forms'), a dtype other than the three, or a negative
// max_shard_bytes; IOError when writing fails.
LOOM_API void save_hf_checkpoint(const zoo::Network& network, const std::string& dir, const HfSaveOptions& options = {});

}  // namespace loom::io
