#pragma once
// Private to src/io: the ONNX exporter's built-in exporters (export_layers.cpp,
// export_sequence.cpp), one per layer kind, each found by the type of the kind's attributes
// (nn::attributes_of), never by the kind's name; onnx_export.cpp walks the graph and calls them
// for the layers no registered exporter takes. Needs ONNX_NAMESPACE=onnx and ONNX_ML=1.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loom/io/onnx.h"
#include "loom/nn/layers.h"

namespace loom::io::detail {

// Writes the layer builder.layer() with the exporter of its kind; false when no built-in exporter
// takes its kind (the caller lists it as unexportable).
bool export_builtin(OnnxBuilder& b);

// ONNX pads: all the begins, then all the ends.
std::vector<int64_t> onnx_pads(const std::vector<std::pair<int64_t, int64_t>>& p);
// y = act(x) into `out`; false for a function ONNX has no form of here.
bool activation(OnnxBuilder& b, const nn::ActivationFn& fn, const std::string& x, const std::string& out);

// Values of the layer being written (export_layers.cpp), shared by the kinds made of them: the
// RMS norm of x by `weight` (Mul, ReduceMean, Add, Sqrt, Div, Mul), and the SwiGLU of x by the
// state's gate, up and down (MatMul, Sigmoid, Mul); into `out`, or a fresh value when empty.
std::string rms_norm_value(OnnxBuilder& b, const std::string& x, const Tensor& weight, double eps, const std::string& out = "");
std::string swiglu_value(OnnxBuilder& b, const std::string& x, const nn::State& s, const std::string& out = "");

// export_sequence.cpp
void export_rnn(OnnxBuilder& b, const nn::RNNAttributes& a);
void export_cell(OnnxBuilder& b, const nn::CellAttributes& a);
void export_attention(OnnxBuilder& b, const nn::AttentionAttributes& a);
void export_encoder(OnnxBuilder& b, const nn::TransformerEncoderAttributes& a);
void export_gpt_block(OnnxBuilder& b, const nn::GptBlockAttributes& a);
void export_llama_block(OnnxBuilder& b, const nn::LlamaBlockAttributes& a);

}  // namespace loom::io::detail
