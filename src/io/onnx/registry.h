#pragma once
// Private to Loom: the ONNX importer's registry of converters as plain data, for the conformance
// test (tests/onnx/onnx_import_tests.cpp), which runs every libonnx-testdata case made of claimed
// operators. The registry itself is importer.h's; no protobuf type here.
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom::io::detail {

// One operator the importer converts: nodes of `op` in `domain` ("" is ONNX's default domain,
// which files also write "ai.onnx") in models whose opset for that domain is in [since, until].
// `claimed`: imported on its own; false for an operator read only inside a pattern of nodes (Div,
// in gelu's formula), which a model of that operator alone does not import.
struct OnnxConverterInfo {
  std::string domain, op;
  int64_t since = 0, until = 0;
  bool claimed = false;
};

// Every converter, in the registry's order (io::onnx_importable_operators() lists the claimed ones'
// operators).
LOOM_INTERNAL std::vector<OnnxConverterInfo> onnx_import_registry();

}  // namespace loom::io::detail
