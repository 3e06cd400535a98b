#pragma once
// Private to src/io: reading untrusted ONNX models (onnx_read.cpp) for the importer
// (onnx_import.cpp). Needs ONNX_NAMESPACE=onnx and ONNX_ML=1 (CMakeLists.txt).
#include <cstdint>
#include <map>
#include <string>

#include "io/onnx_proto.h"
#include "loom/core/tensor.h"

namespace loom::io::detail {

// The ranges of external data files read so far (by resolved path): a range read twice or
// overlapping another is refused, so the bytes loaded stay within the files' sizes.
struct ExternalReads {
  std::map<std::string, std::map<uint64_t, uint64_t>> ranges;  // path -> offset -> end
};

// A ModelProto from bytes (IOError when they do not parse or hold no graph; 2 GB at most).
onnx::ModelProto parse_model(const std::string& bytes);
// The same from a regular file.
onnx::ModelProto read_model_file(const std::string& path);
// The tensor's values: rank at most 16, dimensions at most 2^40, at most 2^33 elements, and
// exactly as many values (or bytes) as the dims say, checked before anything is allocated.
// External data is read from `folder` (empty: refused), inside it only. IOError otherwise.
Tensor to_tensor(const onnx::TensorProto& t, const std::string& folder, ExternalReads& reads);

}  // namespace loom::io::detail
