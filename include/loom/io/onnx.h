#pragma once
// ONNX export: a layer graph as an ONNX model file (opset 17, IR version 8) that other runtimes
// (ONNX Runtime, TensorRT, ...) run. Inference semantics: Dropout is the identity, BatchNorm
// uses its running statistics. The graph's inputs are the model's inputs (then each SparseInput,
// taking its dense rows) and its output layers its outputs, under the layers' names; Modules are
// inlined; every parameter and buffer is an initializer named by its key in graph_state
// ("<layer>/<path>"). The batch dimension is dynamic by default.
//
// A graph holding layers no exporter knows fails with one ValueError naming every such layer
// (name and kind) at once. A kind of one's own exports through an exporter registered for its
// C++ type (register_onnx_exporter), which writes ONNX nodes through OnnxBuilder; no protobuf
// type appears here. See docs/onnx.md.
#include <cstdint>
#include <functional>
#include <string>
#include <typeinfo>
#include <variant>
#include <vector>

#include "loom/core/api.h"
#include "loom/graph/graph.h"

namespace loom::io {

struct LOOM_API OnnxExportOptions {
  // The leading dimension of every input and output is the symbolic "batch"; false fixes it to
  // batch_size (the other -1 dimensions of the inputs stay symbolic either way).
  bool dynamic_batch = true;
  int64_t batch_size = 1;
  // A BatchNorm whose input is a Conv1D/Conv2D or a Linear on (batch, units) read by nothing
  // else is folded into that layer's weights and bias (one Conv or MatMul + Add instead of two
  // nodes; results differ by float32 rounding).
  bool fold_batch_norm = false;
  // export_onnx writes the weights to "<file>.data" beside the model (ONNX external data, offsets
  // 64-byte aligned; tensors under 1 KB stay inside, as onnx.save does) when the model would pass
  // protobuf's 2 GB limit (external_data_threshold bytes), or always with this set.
  bool external_data = false;
  // The serialized size from which export_onnx switches to external data by itself: protobuf's
  // limit (2^31 bytes), which a model must stay under; lower values let a test take the switch.
  int64_t external_data_threshold = int64_t{1} << 31;
  // Written as the model's producer and doc string.
  std::string producer_name = "loom";
  std::string doc_string;
};

// An ONNX node attribute: an integer, a float, a string, or a list of integers, floats or strings.
struct LOOM_API OnnxAttribute {
  std::string name;
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, std::vector<std::string>> value;
};

// What an exporter writes one layer with. Values are named by strings: input(i) is the value the
// layer's i-th input layer produced, output() the name the layer's result must be given (one of
// its nodes must write it), fresh() a new name for an intermediate value.
class LOOM_API OnnxBuilder {
 public:
  virtual ~OnnxBuilder() = default;
  // The layer being exported.
  virtual const nn::Layer& layer() const = 0;
  virtual std::string input(size_t i) const = 0;
  virtual std::string output() const = 0;
  virtual std::string fresh(const std::string& hint) = 0;
  // A node; returns nothing (its outputs are the names given).
  virtual void node(const std::string& op_type, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                    const std::vector<OnnxAttribute>& attributes = {}) = 0;
  // The value holding `tensor`: a parameter or buffer of the graph is its graph_state key
  // (written once however many layers share it); any other tensor (a transposed or folded
  // weight) becomes an initializer named "<layer>/<hint>".
  virtual std::string tensor(const Tensor& tensor, const std::string& hint) = 0;
  // A constant int64 vector (shapes, axes, pads for ops that take them as inputs).
  virtual std::string ints(const std::vector<int64_t>& values, const std::string& hint) = 0;
};

// Writes one layer: reads builder.layer() (its attributes by type, its state) and adds the nodes
// that compute it from builder.input(i) into builder.output().
using OnnxExporter = std::function<void(OnnxBuilder& builder)>;

// Registers the exporter of the layer kind whose implementation class is `kind`
// (typeid(MyKindImpl)), replacing any earlier one; it takes precedence over the built-in ones.
LOOM_API void register_onnx_exporter(const std::type_info& kind, OnnxExporter exporter);
template <class KindImpl>
void register_onnx_exporter(OnnxExporter exporter) {
  register_onnx_exporter(typeid(KindImpl), std::move(exporter));
}

// "name (Kind)" of every layer of `graph` that no exporter takes, in graph order (empty: the
// graph exports).
LOOM_API std::vector<std::string> onnx_unexportable(const Graph& graph);

// The ONNX model's bytes (a serialized ModelProto, weights inside; IOError past 2 GB: use
// export_onnx, which moves them to a file of their own).
LOOM_API std::string encode_onnx(const Graph& graph, const OnnxExportOptions& options = {});
// Writes the model to `path` atomically (and its weights to "<path>.data" first when it would pass
// 2 GB, or with external_data). ValueError listing every layer that cannot be exported, all at
// once, before anything is written; IOError when a file cannot be written.
LOOM_API void export_onnx(const Graph& graph, const std::string& path, const OnnxExportOptions& options = {});

// ------------------------------------------------------------------------------- import
// ONNX import: an ONNX model (default domain, opsets up to 17) as a Graph of Loom's layers
// (Gemm / MatMul (+ Add) -> Linear, Conv -> Conv1D / Conv2D, BatchNormalization -> BatchNorm with
// its running statistics as buffers, pooling, activations, merges, shapes; docs/onnx.md), which
// compile() runs and train::Model fine-tunes. The initializers become the layers' parameters and
// buffers, converted where the layouts differ (Gemm's transB). Layers are named after the value
// each one computes (so a file export_onnx wrote comes back under its layers' names and
// graph_state keys); the graph's inputs are the model's inputs that are not initializers.
//
// A model with operators (or attribute values) no layer expresses fails with one ValueError
// listing every such node (op type and node name) at once. Files are untrusted input: a
// malformed model is an IOError or ValueError, never a crash; every tensor's size is checked
// against its data before anything is allocated; external data must lie inside the model's
// folder (no absolute path, no "..", no symlink leading out: IOError).

struct LOOM_API OnnxImportOptions {
  // The most bytes the model's tensors (initializers and Constant values, inline and external
  // data together) may take once loaded; 0: the machine's physical memory. Each tensor is
  // counted before it is allocated, and also against the memory limit (set_memory_limit): a
  // tensor past either is an OutOfMemoryError naming it (a file's size does not bound memory:
  // a sparse external data file of 32 GiB holds no disk blocks).
  int64_t max_tensor_bytes = 0;
};

// The ONNX operators import_onnx maps to layers (under the conditions of docs/onnx.md).
LOOM_API std::vector<std::string> onnx_importable_operators();
// The model in the file `path` (external data read from beside it).
LOOM_API Graph import_onnx(const std::string& path, const OnnxImportOptions& options = {});
// The model in `bytes` (a serialized ModelProto; a tensor with external data is refused).
LOOM_API Graph decode_onnx(const std::string& bytes, const OnnxImportOptions& options = {});

}  // namespace loom::io
