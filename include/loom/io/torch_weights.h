#pragma once
// PyTorch weights into Loom graphs: a state_dict saved as safetensors (safetensors.torch's
// save_file(model.state_dict(), path)) loaded into a Graph through a declared name map.
//
// A TorchMap is an ordered list of rules from a PyTorch key to a Loom key (graph_state's
// "<layer name>/<path in the layer's State>"), each with a layout conversion, plus patterns of
// PyTorch keys to ignore and of Loom keys that keep their value. Patterns may hold placeholders
// `{name}` (a letter or '_' then letters, digits, '_'), each matching one or more characters
// (dots included; the leftmost, shortest match wins); a placeholder of the Loom side takes
// what the same name matched on the PyTorch side:
//   {"layer{i}.{j}.conv1.weight", "stage{i}.block{j}.conv_a/weights"}
//   {"{m}.weight", "{m}/weights", TorchLayout::Transpose}
// A PyTorch key that an ignore pattern matches is skipped; otherwise the first matching rule is
// used. See docs/torch_weights.md.
//
// Loading is strict and all or nothing: every parameter and buffer of the graph must be filled
// exactly once (or kept), every PyTorch key must be mapped or ignored, and the shapes (after the
// layout conversion) and dtypes must agree; every problem is listed in one ValueError, and on
// error the graph is unchanged (the checks are load_graph_state's, io/model_file.h).
#include <string>
#include <utility>
#include <vector>

#include "loom/core/api.h"
#include "loom/graph/graph.h"
#include "loom/io/safetensors.h"
#include "loom/zoo/architectures.h"

namespace loom::io {

// How a PyTorch tensor becomes the Loom tensor.
enum class TorchLayout {
  Same,       // the same layout: convolutions (OIHW in both), batch norm, embeddings, biases
  Transpose,  // a 2-D matrix transposed: nn.Linear's weight is (out, in), Loom's Linear (in, out)
};

struct LOOM_API TorchRule {
  TorchRule() = default;
  TorchRule(std::string torch_key, std::string loom_key, TorchLayout layout_ = TorchLayout::Same)
      : torch(std::move(torch_key)), loom(std::move(loom_key)), layout(layout_) {}
  // a split rule: {"h.0.attn.c_attn.weight", {"h.0.attn/q_weight", "h.0.attn/k_weight", "h.0.attn/v_weight"}, 1}
  TorchRule(std::string torch_key, std::vector<std::string> pieces, int64_t axis, TorchLayout layout_ = TorchLayout::Same)
      : torch(std::move(torch_key)), layout(layout_), split(std::move(pieces)), split_axis(axis) {}

  std::string torch;  // a PyTorch state_dict key or pattern
  std::string loom;   // the Loom key it fills (graph_state's), with the same placeholders; empty with `split`
  TorchLayout layout = TorchLayout::Same;
  // A packed PyTorch tensor that fills several Loom tensors (GPT-2's c_attn: q, k and v side by
  // side): after the layout conversion it is cut along `split_axis` into split.size() equal
  // pieces, piece j filling the Loom key split[j] (placeholders as `loom`'s). Empty: `loom`.
  std::vector<std::string> split;
  int64_t split_axis = 0;
};

struct LOOM_API TorchMap {
  std::vector<TorchRule> rules;     // the first rule whose `torch` matches a key is used
  std::vector<std::string> ignore;  // PyTorch keys (patterns) with no Loom counterpart, skipped before the rules
  std::vector<std::string> keep;    // Loom keys (patterns) no PyTorch tensor fills: left as they are

  // Appends the rules of `other`, then its ignore and keep patterns (this map's rules first).
  TorchMap& append(const TorchMap& other);
};

// The map for a graph whose layer names are PyTorch's module names (the zoo's models, or one's
// own model built with the same names): per layer, by its kind,
//   Linear                        <name>.weight -> <name>/weights (transposed), <name>.bias
//   Conv1D, Conv2D, Conv2DTranspose <name>.weight -> <name>/weights, <name>.bias
//   BatchNorm                     <name>.weight, .bias, .running_mean, .running_var
//                                 (<name>.num_batches_tracked ignored)
//   LayerNorm                     <name>.weight, .bias
//   Lookup                        <name>.weight -> <name>/weights (nn.Embedding)
//   Dropout                       <name>/rng kept (its generator; PyTorch's dropout has none)
// Rules are exact keys (no placeholders). Tensors of other kinds get no rule: append rules
// for them, or they are reported missing.
LOOM_API TorchMap torch_map_by_names(const Graph& graph);

// The map from torchvision's state_dict of the same architecture to a zoo model: resnet18/34,
// vgg11/16/19 (and *_bn), densenet121 and the other zoo::resnet, zoo::vgg, zoo::densenet
// networks (they carry torchvision's module names). ValueError for a zoo model without a
// torchvision counterpart (mlp, unet, ...).
LOOM_API TorchMap torchvision_map(const zoo::Network& network);

// The state dict converted to the graph's keys and layouts, checked against the graph as
// load_graph_state checks (kept tensors are the graph's current values, copied). Throws one
// ValueError listing every problem: PyTorch keys no rule maps and no pattern ignores, rules that
// name a Loom key the graph does not have, two PyTorch keys for one Loom tensor, a Transpose of
// a tensor that is not 2-D, the graph's tensors no PyTorch key fills, and shape or dtype
// mismatches (naming both keys). `source` names the state dict in messages.
LOOM_API TensorMap convert_torch_state(const Graph& graph, const TensorMap& state_dict, const TorchMap& map,
                                       const std::string& source = "state_dict");
// The reverse of convert_torch_state: the graph's tensors as the PyTorch state dict `map`
// describes (Transpose undone, split pieces concatenated), in the graph's dtypes, one entry per
// rule (a tensor shared under two Loom names is written once per rule that names it). The rules
// must be exact keys (no placeholders: torch_map_by_names's kind); ValueError naming the rule
// for a placeholder, or for a Loom key the graph does not have. Keep and ignore patterns are not
// written.
LOOM_API TensorMap torch_state_from_graph(const Graph& graph, const TorchMap& map);

// convert_torch_state, then the copy into the graph (all or nothing).
LOOM_API void load_torch_state(const Graph& graph, const TensorMap& state_dict, const TorchMap& map,
                               const std::string& source = "state_dict");
// The same from a safetensors file (load_safetensors's IOErrors for a bad file).
LOOM_API void load_torch_weights(const std::string& path, const Graph& graph, const TorchMap& map);

}  // namespace loom::io
