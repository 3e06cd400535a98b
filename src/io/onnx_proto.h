#pragma once
// Private to src/io: what the ONNX exporter and importer share (Loom dtypes <-> TensorProto
// element types). Sources including it need ONNX_NAMESPACE=onnx and ONNX_ML=1 (CMakeLists.txt).
#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

#include "loom/core/dtype.h"
#include "loom/core/error.h"

namespace loom::io::detail {

inline std::optional<int32_t> onnx_elem_type(DType d) {
  switch (d) {
    case DType::Float32: return onnx::TensorProto::FLOAT;
    case DType::Float64: return onnx::TensorProto::DOUBLE;
    case DType::Float16: return onnx::TensorProto::FLOAT16;
    case DType::BFloat16: return onnx::TensorProto::BFLOAT16;
    case DType::Int64: return onnx::TensorProto::INT64;
    case DType::Int32: return onnx::TensorProto::INT32;
    case DType::UInt8: return onnx::TensorProto::UINT8;
    case DType::Bool: return onnx::TensorProto::BOOL;
  }
  return std::nullopt;
}

// The Loom dtype of an ONNX element type; nullopt for those Loom has none of (int8, strings, ...).
inline std::optional<DType> loom_dtype(int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::Float32;
    case onnx::TensorProto::DOUBLE: return DType::Float64;
    case onnx::TensorProto::FLOAT16: return DType::Float16;
    case onnx::TensorProto::BFLOAT16: return DType::BFloat16;
    case onnx::TensorProto::INT64: return DType::Int64;
    case onnx::TensorProto::INT32: return DType::Int32;
    case onnx::TensorProto::UINT8: return DType::UInt8;
    case onnx::TensorProto::BOOL: return DType::Bool;
    default: return std::nullopt;
  }
}

}  // namespace loom::io::detail
