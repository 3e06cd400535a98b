#pragma once
// Saving and loading whole models and training checkpoints as single safetensors files.
//
// A model file (save_model) is ONE safetensors file: its tensors are the graph's parameters and
// buffers, keyed "<layer name>/<path in the layer's State>" (e.g. "dense_1/weights",
// "enc/fw/w_ih", "bn/running_mean"), and its "__metadata__" holds the architecture:
//   "loom.format": "model", "loom.graph": graph_to_json(graph)
// plus the caller's metadata. load_model rebuilds the graph from that JSON alone
// (graph_from_json) and loads the weights into it. A state file (save_state) is the same
// without "loom.graph" ("loom.format": "state"): weights for a graph the caller builds.
// Both may carry extra tensors (optimizer moments, step counters, ...) whose names are listed
// in "loom.extra", and string metadata; the three keys above are reserved.
//
// Tensors shared between layers (reuse_with, tied weights, modules) are written once, under the
// name of the first layer (in graph order) that holds them; on load any layer name that holds
// the tensor is accepted. See docs/io.md.
#include <string>

#include "loom/core/api.h"
#include "loom/graph/graph.h"
#include "loom/io/safetensors.h"

namespace loom::io {

// What a file carries besides the graph's weights.
struct LOOM_API Checkpoint {
  TensorMap extra;    // the extra tensors, by the names they were saved under
  Metadata metadata;  // the caller's metadata (without the reserved loom.format/graph/extra)
};

// Every parameter and buffer of `graph` by its key, each shared tensor once. The tensors are
// the graph's own (writing into them changes the graph).
LOOM_API TensorMap graph_state(const Graph& graph);
// Copies `tensors` into the graph's parameters and buffers. Strict: every parameter and buffer
// must be present exactly once with the same shape and dtype, and no other name may appear.
// Throws ValueError for missing, unexpected or doubly given names, ShapeError and DTypeError for
// mismatches, each naming `source` and the tensor; everything is checked before anything is
// copied, so on error the graph is unchanged.
LOOM_API void load_graph_state(const Graph& graph, const TensorMap& tensors, const std::string& source = "tensors");
// The checks of load_graph_state alone (the same errors); copies nothing.
LOOM_API void check_graph_state(const Graph& graph, const TensorMap& tensors, const std::string& source = "tensors");

// Writes the architecture and all weights and buffers of `graph` (plus `extra` tensors and
// `metadata`) to `path` atomically: everything is encoded before the file is touched and written
// through write_file_atomic, so a failure (a Lambda layer, a bad name, a full disk) leaves any
// previous file at `path` intact.
LOOM_API void save_model(const std::string& path, const Graph& graph, const TensorMap& extra = {}, const Metadata& metadata = {});
// Rebuilds the graph from the file's architecture and loads its weights. Fills *rest with the
// extra tensors and metadata when given. Throws IOError for a file that is not a valid
// safetensors file or holds no architecture, ValueError for a bad architecture, and the errors
// of load_graph_state when the weights do not fit it.
LOOM_API Graph load_model(const std::string& path, Checkpoint* rest = nullptr);

// Weights (and extras, metadata) alone, for a graph the caller builds: training checkpoints.
LOOM_API void save_state(const std::string& path, const Graph& graph, const TensorMap& extra = {}, const Metadata& metadata = {});
// Loads the weights of a state or model file into `graph` (strictly, as load_graph_state) and
// returns the extras and metadata.
LOOM_API Checkpoint load_state(const std::string& path, const Graph& graph);
// The in-memory forms, for stores that keep the architecture and the weights apart
// (loom::store): encode_state returns the bytes save_state writes; build_model rebuilds a graph
// from its architecture JSON (graph_to_json) and loads `weights` into it strictly, allocating no
// more than `weights` hold, with load_model's errors (`source` names the data in them).
LOOM_API std::string encode_state(const Graph& graph, const TensorMap& extra = {}, const Metadata& metadata = {});
LOOM_API Graph build_model(const std::string& architecture, const TensorMap& weights, const std::string& source);

// Reads a state or model file without touching any graph: its weights by key into *weights
// (when given), its extras and metadata returned. For loads that check everything before
// changing anything (Model::load_checkpoint): read_state, check_graph_state, then commit.
LOOM_API Checkpoint read_state(const std::string& path, TensorMap* weights);

}  // namespace loom::io
