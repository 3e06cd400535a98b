#pragma once
// Private to src/io: reading untrusted ONNX models (onnx_read.cpp) for the importer
// (onnx_import.cpp). Needs ONNX_NAMESPACE=onnx and ONNX_ML=1 (CMakeLists.txt).
#include <cstdint>
#include <map>
#include <string>

#include "io/onnx_proto.h"
#include "loom/core/tensor.h"

namespace loom::io::detail {

// What an import has loaded so far. The ranges of external data files (by resolved path): a
// range read twice or overlapping another is refused, so the bytes loaded stay within the
// files' sizes. And the bytes of every tensor, against a cap: a file's size does not bound
// memory (a sparse file of 32 GiB holds no disk blocks), so each tensor's bytes are checked
// against the cap and the memory limit (set_memory_limit) before anything is allocated.
struct ExternalReads {
  std::map<std::string, std::map<uint64_t, uint64_t>> ranges;  // path -> offset -> end
  uint64_t max_bytes = 0;  // OnnxImportOptions::max_tensor_bytes (0: the machine's physical memory)
  uint64_t loaded = 0;     // bytes of the tensors loaded so far
};

// A ModelProto from bytes (IOError when they do not parse or hold no graph; 2 GB at most).
onnx::ModelProto parse_model(const std::string& bytes);
// The same from a regular file.
onnx::ModelProto read_model_file(const std::string& path);
// The tensor's values: rank at most 16, dimensions at most 2^40, at most 2^33 elements, and
// exactly as many values (or bytes) as the dims say, checked before anything is allocated;
// its bytes within reads.max_bytes (with those loaded before) and the memory limit
// (OutOfMemoryError naming the tensor). External data is read from `folder` (empty: refused), inside it only. IOError otherwise.
Tensor to_tensor(const onnx::TensorProto& t, const std::string& folder, ExternalReads& reads);

}  // namespace loom::io::detail
