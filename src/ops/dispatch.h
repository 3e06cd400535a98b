#pragma once
// Maps a runtime DType to a C++ element type inside a generic lambda: LOOM_DISPATCH_*(dtype,
// "op", [&](auto tag) { using T = decltype(tag); ... }).
#include <string>

#include "loom/core/dtype.h"
#include "loom/core/error.h"

namespace loom::detail {

[[noreturn]] inline void unsupported_dtype(const char* op, DType d, const char* valid) {
  throw DTypeError(std::string(op) + ": dtype " + dtype_name(d) + " is not supported (valid: " + valid + ")");
}

template <typename F>
decltype(auto) dispatch_all(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::Bool: return f(bool{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float16: return f(half{});
    case DType::BFloat16: return f(bfloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  unsupported_dtype(op, d, "any");
}

// The compute types: everything but the 16-bit floats (which compute in float32).
template <typename F>
decltype(auto) dispatch_compute(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::Bool: return f(bool{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  unsupported_dtype(op, d, "bool, uint8, int32, int64, float32, float64");
}

template <typename F>
decltype(auto) dispatch_float(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  unsupported_dtype(op, d, "float32, float64");
}

}  // namespace loom::detail
