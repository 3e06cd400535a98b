#pragma once
// Private to src/io/onnx: the ONNX importer (loom/io/onnx.h, docs/onnx.md). Each node of the
// model's graph, in its order, becomes a Loom layer through the converter its operator has in the
// registry (Converter, below: one per (domain, operator, opset range)); blocks of nodes that one
// layer computes are found first by the pattern matchers (import_patterns.h). Every node that no
// converter takes is collected, and the model is refused with all of them at once.
//
// The converters are members of Importer, defined in one file per family of operators, each file
// with its part of the registry (the static *_converters() below, joined in importer.cpp):
//   importer.cpp               run() in its steps, the registry, the helpers converters read nodes with
//   import_graph_queries.cpp   questions about the graph (who computes / reads a value, constants)
//   import_elementwise.cpp     activations, Clip, Dropout, Identity, Constant, merges, gelu's formula
//   import_dense.cpp           Gemm, MatMul (+ Add), Gather, OneHot, LayerNormalization, BatchNormalization
//   import_conv.cpp            Conv, ConvTranspose, pooling, Pad, Reduce*, the exporter's adaptive pooling
//   import_shape.cpp           Flatten, Reshape, Transpose, Slice, Concat, shapes computed at import
//   import_recurrent.cpp       LSTM, GRU, RNN with the transposes around them
//   import_attention.cpp       attention blocks (Loom's exporter's form), their layers
//   import_attention_torch.cpp torch.onnx's form of nn.MultiheadAttention
//   import_encoder.cpp         a whole TransformerEncoderLayer around a self-attention block
// The reading of untrusted bytes is onnx_read.cpp's. Needs ONNX_NAMESPACE=onnx and ONNX_ML=1.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "io/onnx/import_patterns.h"
#include "io/onnx_read.h"
#include "loom/graph/graph.h"
#include "loom/io/onnx.h"
#include "loom/nn/layers.h"

namespace loom::io::detail {

// Sizes an attribute may give (pads, strides, dilations, kernel sizes): bounded, so that a hostile
// file cannot make a layer's output shape enormous.
constexpr int64_t kMaxAttr = int64_t{1} << 20;
// The opsets of ONNX's default domain the importer reads (a model past the last is refused).
constexpr int64_t kFirstOpset = 1, kLastOpset = 17;

// A node that cannot be imported: why (collected, reported with every other at once).
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The double a float attribute stands for: its shortest decimal form (1e-5f -> 1e-5), so that
// a value Loom wrote as float comes back as the double it was.
double float_attr(float f);

class Importer;

// One entry of the registry: the converter of the nodes of `op` in `domain` ("" is ONNX's default
// domain, also written "ai.onnx") in models whose opset for the domain is in [since, until].
// `claimed`: the operator is imported on its own (io::onnx_importable_operators(), the conformance
// test); false for one read only inside a pattern (Div, in gelu's formula). A converter reads the
// node being imported (Importer::node_) and sets its value, or throws Unsupported with the reason.
// What sets one Reduce* operator apart (the registry's entries, import_conv.cpp): each is a
// GlobalPool of the reduced axes.
struct Reduction {
  int64_t axes_input_since = 18;  // the opset from which the axes are an input, not an attribute
  bool max_pool = false;          // GlobalPool's max rather than its average
  bool negated = false;           // ReduceMin: min(x) = -max(-x)
  bool summed = false;            // ReduceSum: the average times the count reduced
};

struct Converter {
  std::string_view domain, op;
  int64_t since = kFirstOpset, until = kLastOpset;
  bool claimed = true;
  void (*convert)(Importer&) = nullptr;
};

class Importer {
 public:
  Importer(const onnx::ModelProto& m, std::string folder, const OnnxImportOptions& options);
  Graph run();

  // The registry: every family's converters, checked once (no two entries of one operator whose
  // opsets overlap). find_converter: the entry for the operator at the opset, or nullptr.
  static const std::vector<Converter>& registry();
  static const Converter* find_converter(std::string_view domain, std::string_view op, int64_t opset);

 private:
  // the families' parts of the registry (each in its file)
  static std::vector<Converter> elementwise_converters();
  static std::vector<Converter> dense_converters();
  static std::vector<Converter> conv_converters();
  static std::vector<Converter> shape_converters();
  static std::vector<Converter> recurrent_converters();

  const onnx::ModelProto& m_;
  const onnx::GraphProto& g_;
  std::string folder_;
  detail::ExternalReads reads_;
  int64_t opset_ = 0;
  std::map<std::string, Tensor> consts_;
  std::unordered_map<std::string, nn::Layer> values_;
  std::unordered_map<std::string, int> uses_;
  std::unordered_set<std::string> poisoned_, names_;
  std::set<int> done_;
  std::vector<std::pair<std::string, Tensor>> pending_;  // graph_state key -> value
  std::vector<std::string> failures_;
  std::unordered_set<const nn::LayerImpl*> inputs_;
  std::unordered_set<const nn::LayerImpl*> batchless_;  // layers computed from constants only (no batch axis)
  std::unordered_map<std::string, int> producer_;  // value -> the node computing it
  std::unordered_map<std::string, std::vector<std::pair<int, int>>> readers_;  // value -> (node, input index) reading it
  std::unordered_set<std::string> zeros_;           // values known to be all zeros (recurrent initial states)
  // (time, batch, features) values: the batch-first layer they transpose (read by recurrent nodes only)
  std::unordered_map<std::string, nn::Layer> time_major_;
  std::map<int, AdaptivePool> adaptive_;      // the exporter's adaptive pooling, by the index of its last node
  std::map<int, AttentionBlock> attention_;  // by the index of the block's last node
  std::map<int, EncoderBlock> encoders_;
  const onnx::NodeProto* node_ = nullptr;  // the node being imported
  int index_ = 0;                          // and its index

  // operator -> how many nodes of it and the first one's name, in the order first met
  struct UnsupportedOp {
    int64_t count = 0;
    std::string first;
  };
  std::vector<std::pair<std::string, UnsupportedOp>> unsupported_;
  // a Pad's output folded into the AveragePool reading it: the padded layer and the pads (begins, ends)
  std::unordered_map<std::string, std::pair<nn::Layer, std::vector<int64_t>>> folded_pads_;
  // integer values computed from shapes (Shape, then Gather, Concat, ...), read only by other such
  // nodes and by Reshape's target shape, which evaluates them at import (find_shape_arithmetic)
  std::unordered_set<std::string> shape_values_;
  std::unordered_set<std::string> defaults_;  // initializers that are also graph inputs (IR >= 4)
  // eval_ints' values (cleared for each probe size: the values depend on it)
  mutable std::unordered_map<std::string, std::vector<int64_t>> ints_memo_;

  // ------------------------------------------------------------------ importer.cpp: the steps of run()
  void check_versions() const;
  void check_single_writers() const;
  void read_opset();
  std::vector<nn::Layer> read_inputs();
  void read_constants();
  void index_nodes();
  void import_nodes();
  void import_one(int k);
  std::vector<nn::Layer> outputs();
  void throw_failures() const;
  Graph built(const std::vector<nn::Layer>& outputs, const std::vector<nn::Layer>& inputs) const;
  void import_node(const onnx::NodeProto& n);
  void unsupported(const onnx::NodeProto& n);
  // ------------------------------------------------------------------ importer.cpp: node helpers
  bool is_input(const nn::Layer& l) const { return inputs_.count(l.impl().get()) > 0; }
  static std::string node_name(const onnx::NodeProto& n);
  void poison(const onnx::NodeProto& n);
  static std::string sanitize(const std::string& s) { return s.empty() ? std::string("value") : s; }
  std::string unique(const std::string& want);
  nn::Layer make_input(const onnx::ValueInfoProto& v);
  const onnx::AttributeProto* attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t dflt) const;
  float attr_float(const std::string& name, float dflt) const;
  std::string attr_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> dflt = {}) const;
  // Attributes the importer does not read must be absent.
  void only_attrs(std::initializer_list<const char*> known) const;
  size_t n_inputs() const;  // without trailing empty (omitted) inputs
  bool has_input(size_t i) const { return i < n_inputs() && !node_->input(static_cast<int>(i)).empty(); }
  bool is_const(size_t i) const { return has_input(i) && consts_.count(node_->input(static_cast<int>(i))); }
  const Tensor& constant(size_t i, const char* what) const;
  nn::Layer value(size_t i);
  nn::Layer value_named(const std::string& name);
  void single_output() const;
  const std::string& out() const;
  void set(const std::string& value_name, const nn::Layer& l) { values_[value_name] = l; }
  void param(const nn::Layer& l, const std::string& path, const Tensor& t) { pending_.emplace_back(l.name() + "/" + path, t); }
  static std::vector<int64_t> ints_of(const Tensor& t);
  static double scalar_of(const Tensor& t) { return t.astype(DType::Float64).contiguous().item<double>(); }
  int sole_reader(const std::string& v) const;
  static const nn::Layer& floating(const nn::Layer& x);
  static int64_t rank_of(const nn::Layer& l) { return static_cast<int64_t>(l.shape().size()); }
  int64_t norm_axis(int64_t axis, int64_t rank) const;

  // ------------------------------------------------------------------ import_graph_queries.cpp
  const onnx::NodeProto* producer_of(const std::string& v, int* at = nullptr) const;
  const onnx::NodeProto& need(const std::string& v, const char* op, std::set<int>& nodes, const std::string& why) const;
  void need_perm(const onnx::NodeProto& t, const std::vector<int64_t>& p, const std::string& what) const;
  std::vector<int> readers_of(const std::string& v) const;
  bool is_graph_output(const std::string& v) const;
  int reader_besides_shapes(const std::string& v, const char* op) const;
  int only_reader(const std::string& v) const;
  const onnx::NodeProto* next(const std::string& v, const char* op, int* at) const;
  const onnx::NodeProto* next_reader(const std::string& v, const char* op, int* at) const;
  const onnx::NodeProto* made_by(const std::string& v, const char* op, std::set<int>& nodes) const;
  bool const_near(const std::string& name, double want) const;
  bool const_is(const std::string& name, const std::vector<int64_t>& want, const Shape& shape) const;
  static int64_t int_attr_of(const onnx::NodeProto& n, const char* name, int64_t dflt);
  std::vector<int64_t> perm_of(const onnx::NodeProto& n) const;
  static std::string ints_str(const std::vector<int64_t>& v);
  const onnx::NodeProto* follow(const std::string& v, const char* op, const std::function<bool(const onnx::NodeProto&)>& ok, std::vector<int>& chain) const;
  std::function<bool(const onnx::NodeProto&)> perm_is(std::vector<int64_t> p) const;
  std::function<bool(const onnx::NodeProto&)> reshape_to(std::vector<int64_t> s) const;
  std::function<bool(const onnx::NodeProto&)> squeeze_axis(int64_t axis) const;
  // ------------------------------------------------------------------ import_elementwise.cpp
  void import_constant();
  void import_identity();
  // One converter per operator (the registry's entries): each passes what makes its operator.
  void import_activation(const nn::ActivationFn& fn);
  void import_fixed_alpha(const nn::ActivationFn& fn, float alpha, const char* why);
  void import_hard_sigmoid();
  void import_softmax(const nn::ActivationFn& fn);
  void import_clip(bool bounds_as_inputs);
  void import_dropout();
  using MakeMerge = nn::Layer (*)(const std::vector<nn::Layer>& operands, const std::string& name);
  void import_merge(MakeMerge make);
  bool gelu_at(int k0, const std::string& x, std::string& y, std::vector<int>& ks) const;
  bool import_gelu();
  nn::Layer scaled(const nn::Layer& h, double factor, const std::string& name);
  nn::Layer negated(const nn::Layer& h, const std::string& name) { return scaled(h, -1.0, name); }
  // ------------------------------------------------------------------ import_dense.cpp
  void linear(const nn::Layer& x, const Tensor& w, const Tensor* bias, const std::string& value_name);
  void import_gemm();
  void import_matmul();
  void import_gather();
  void import_one_hot();
  void import_layer_norm();
  void import_batch_norm();
  // ------------------------------------------------------------------ import_conv.cpp
  std::vector<std::pair<int64_t, int64_t>> pads_of(size_t n) const;
  std::vector<int64_t> per_axis(const char* name, size_t n) const;
  void import_conv();
  void import_conv_transpose();
  void import_pool(bool max);
  void import_global_pool(bool max);
  void import_pad(bool widths_as_inputs);
  void import_reduce(const Reduction& reduction);
  int64_t adaptive_matrix_size(const std::string& p, const std::string& x, int64_t axis, std::set<int>& nodes) const;
  void find_adaptive_pools();
  void import_adaptive_pool(const AdaptivePool& a);
  // ------------------------------------------------------------------ import_shape.cpp
  void find_shape_arithmetic();
  std::vector<int64_t> evaluated_target(const std::string& v);
  std::vector<int64_t> evaluated_bounds(const std::string& v, const std::string& what);
  std::array<std::vector<int64_t>, 2> at_two_batch_sizes(const std::string& v, const std::string& what);
  std::optional<std::vector<int64_t>> eval_ints(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes,
                                                int depth = 0) const;
  std::optional<std::vector<int64_t>> eval_ints_of(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes,
                                                   int depth) const;
  static std::optional<std::vector<int64_t>> reshaped(const std::vector<int64_t>& in, std::vector<int64_t> target);
  void import_flatten();
  void import_reshape();
  void import_transpose();
  void import_slice();
  void import_concat();
  // ------------------------------------------------------------------ import_recurrent.cpp
  static bool is_recurrent(const onnx::NodeProto& n);
  bool all_zero(const std::string& v) const;
  void find_zero_states();
  bool read_as_sequence_only(const std::string& v) const;
  void import_rnn(const std::string& op);
  RecurrentNode recurrent_node(const std::string& op);
  void recurrent_weights(RecurrentNode& r);
  nn::ActivationFn recurrent_activation(const std::string& op, int64_t dirs) const;
  RecurrentReaders y_readers(int64_t dirs) const;
  RecurrentReaders y_h_readers(int64_t dirs) const;
  void set_recurrent_params(const nn::Layer& l, const RecurrentNode& r);
  // ------------------------------------------------------------------ import_attention.cpp
  void find_attention();
  AttentionBlock match_attention(int k) const;
  void loom_block(AttentionBlock& a, const onnx::NodeProto& pv, const std::string& qs, const std::string& ks, int64_t& d, std::set<int>& nodes) const;
  void check_attention(AttentionBlock& a, int64_t d, double scale) const;
  std::string peel_scale(const std::string& v, double& scale, std::set<int>& nodes) const;
  std::string projection(const std::string& y, Tensor& w, Tensor& b, std::set<int>& nodes, const std::string& what) const;
  static Tensor bias_vector(const Tensor& b, int64_t units, const std::string& what);
  std::string loom_heads(const std::string& t, Tensor& w, Tensor& b, int64_t& heads, int64_t& d, std::set<int>& nodes, const std::string& what) const;
  std::string loom_masks(std::string s, AttentionBlock& a, std::set<int>& nodes) const;
  std::string out_projection(const std::string& c, AttentionBlock& a, std::set<int>& nodes) const;
  void set_attention_params(const nn::Layer& l, const std::string& prefix, const AttentionBlock& a);
  bool poisoned_any(std::initializer_list<std::string> vs);
  void import_attention(const AttentionBlock& a);
  void import_encoder(const EncoderBlock& e);
  // ------------------------------------------------------------------ import_attention_torch.cpp
  std::pair<int64_t, int64_t> initializer_rows(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes) const;
  bool slice_of_initializer(const std::string& v) const;
  TorchHead torch_head(const std::string& t, const std::vector<int64_t>& perm, const std::string& what, std::set<int>& nodes) const;
  void torch_heads(AttentionBlock& a, const onnx::NodeProto& pv, const std::string& qs, const std::string& ks, int64_t& d, std::set<int>& nodes) const;
  void torch_output(AttentionBlock& a, const onnx::NodeProto& pv, TorchBlock& t, std::set<int>& nodes) const;
  void torch_probe(const AttentionBlock& a, const onnx::NodeProto& pv, TorchBlock& t, const std::array<int64_t, 3>& probe, std::set<int>& nodes) const;
  void torch_head_at(TorchBlock& t, int i, int64_t n, int64_t len, std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes) const;
  std::vector<int64_t> packed_columns(const onnx::NodeProto& sl, int64_t c, int64_t e, const std::map<std::string, std::vector<int64_t>>& shapes,
                                      std::set<int>& nodes) const;
  // ------------------------------------------------------------------ import_encoder.cpp
  std::optional<std::string> activation_after(const std::string& h, nn::ActivationFn& act, std::set<int>& nodes) const;
  std::optional<EncoderBlock> match_encoder(const AttentionBlock& a) const;
  EncoderForm norm_first_encoder(EncoderBlock& e, double& eps1, double& eps2) const;
  bool post_norm_encoder(EncoderBlock& e, double& eps1, double& eps2) const;
  const onnx::NodeProto* residual_add(const std::string& v, const std::string& other, int& k) const;
  bool encoder_norm(const onnx::NodeProto& n, const AttentionBlock& a, Tensor& w, Tensor& b, double& eps) const;
  bool feed_forward(const std::string& h, EncoderBlock& e, std::string& f) const;
};

}  // namespace loom::io::detail
