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

// export_sequence.cpp
void export_rnn(OnnxBuilder& b, const nn::RNNAttributes& a);
void export_cell(OnnxBuilder& b, const nn::CellAttributes& a);
void export_attention(OnnxBuilder& b, const nn::AttentionAttributes& a);
void export_encoder(OnnxBuilder& b, const nn::TransformerEncoderAttributes& a);

}  // namespace loom::io::detail
