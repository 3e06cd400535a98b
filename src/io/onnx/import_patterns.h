#pragma once
// Private to src/io/onnx: what the importer's pattern matchers find, blocks of nodes that come back
// as one Loom layer. The matchers are the importer's (importer.h): the exporter's adaptive pooling
// (import_conv.cpp), attention and transformer encoder blocks (import_attention.cpp, from Loom's
// exporter and torch.onnx, import_attention_torch.cpp, import_encoder.cpp) and recurrent nodes with
// the transposes around them (import_recurrent.cpp). Needs ONNX_NAMESPACE=onnx and ONNX_ML=1.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "loom/core/tensor.h"
#include "loom/nn/activation.h"
#include "loom/nn/layer.h"

namespace loom::io::detail {

// The exporter's AdaptiveAvgPool2D (two MatMuls by averaging matrices computed from x's shape).
struct AdaptivePool {
  std::string x;
  int64_t oh = 0, ow = 0;
};

// A multi-head attention block (import_attention.cpp says which forms).
struct AttentionBlock {
  std::string q, k, v, keep;  // the batch-first inputs (N, L, E), (N, S, E), the padding mask (N, S)
  bool causal = false;
  int64_t heads = 0;
  Tensor wq, wk, wv, wo, bq, bk, bv, bo;  // Loom's layout: (in, out) matrices; biases undefined without
  std::string out;                        // the block's (N, L, E) value
  std::set<int> nodes;
};

// A whole TransformerEncoderLayer around a self-attention block (import_encoder.cpp).
struct EncoderBlock {
  AttentionBlock att;
  std::string x, out;
  bool norm_first = false;
  double eps = 1e-5;
  nn::ActivationFn act = nn::relu;
  Tensor n1w, n1b, n2w, n2b, w1, b1, w2, b2;
  std::set<int> nodes;
};

// Which form of encoder layer a block is: this form (Matched), this form but not a whole layer
// Loom has (Refused), or another form (Other).
enum class EncoderForm { Matched, Refused, Other };

// One of q, k, v in torch.onnx's form (import_attention_torch.cpp).
struct TorchHead {
  std::string reshape, slice, proj, mm, xt, x;  // slice empty when the projection is the head's own
  Tensor w, b;                                  // the projection's (in, out) weights and bias, when initializers
  std::string w_slice, b_slice;                 // otherwise Slices of initializers (rows of (out, in) weights)
};

// torch.onnx's attention block while it is matched (import_attention_torch.cpp).
struct TorchBlock {
  TorchHead head[3];                             // q, k, v
  int kt1 = -1, kr1 = -1, kr2 = -1;              // the output's Transpose, its Reshape (L N, E), the Reshape (L, N, E)
  std::string y;                                 // the out projection's value
  int64_t e = 0, heads = 0;                      // the units, the heads
  std::vector<int64_t> cols[3], rows[3], brows[3];  // per head: the packed projection's columns, the weights' and bias' rows
};

// A recurrent node (LSTM, GRU, RNN) checked for Loom's RNN layer (import_recurrent.cpp).
struct RecurrentNode {
  std::string op, direction;
  int64_t dirs = 1, gates = 1, n = 0, features = 0;  // directions, gate blocks, hidden size, input features
  nn::Layer x;                                        // the batch-first input
  Tensor w, r, b;                                     // ONNX's W, R and B (b undefined without)
  nn::ActivationFn act = nn::tanh;
};
// The nodes reading a recurrent node's result back (done with it), and the value that is then
// Loom's layer: batch-first, or time-major (read by the next recurrent node).
struct RecurrentReaders {
  std::vector<int> chain;
  std::string batch_first, time_major;
};

}  // namespace loom::io::detail
