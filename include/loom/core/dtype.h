#pragma once
// Element types and NumPy's promotion rules (see docs/dtypes.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "loom/core/api.h"
#include "loom/core/half.h"

namespace loom {

enum class DType : uint8_t { Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64 };

inline constexpr DType Bool = DType::Bool;
inline constexpr DType UInt8 = DType::UInt8;
inline constexpr DType Int32 = DType::Int32;
inline constexpr DType Int64 = DType::Int64;
inline constexpr DType Float16 = DType::Float16;
inline constexpr DType BFloat16 = DType::BFloat16;
inline constexpr DType Float32 = DType::Float32;
inline constexpr DType Float64 = DType::Float64;

inline size_t itemsize(DType dtype) {  // inline: every op asks, often several times
  switch (dtype) {
    case DType::Bool: case DType::UInt8: return 1;
    case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  return 0;
}
LOOM_API const char* dtype_name(DType dtype);
LOOM_API bool is_floating(DType dtype);
LOOM_API bool is_integral(DType dtype);  // bool excluded
// The smallest type both operands convert to safely (numpy.promote_types).
LOOM_API DType promote_types(DType a, DType b);
// True when values of `from` convert to `to` without loss (numpy.can_cast, casting="safe").
LOOM_API bool can_cast(DType from, DType to);

// The DType of a C++ element type.
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<half>() { return DType::Float16; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

}  // namespace loom
