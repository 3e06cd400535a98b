#include "loom/core/dtype.h"

#include <cmath>
#include <limits>

#include "loom/core/error.h"

namespace loom {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

bool is_floating(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}
bool is_integral(DType d) { return d == DType::UInt8 || d == DType::Int32 || d == DType::Int64; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (!fa && !fb) return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
  if (fa && fb) {
    if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
      return DType::Float32;
    return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
  }
  const DType f = fa ? a : b, i = fa ? b : a;
  if (f == DType::Float64) return f;
  if (i == DType::UInt8) return f;  // 8-bit integers fit every float
  return DType::Float64;            // int32/int64 need float64 to be held safely (NumPy)
}

bool can_cast(DType from, DType to) { return promote_types(from, to) == to; }

// float16 <-> float32, round to nearest even, with subnormals, infinities and NaN.
half::half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) {
    // NaN: keep the sign, signalling bit and top 10 payload bits (a float16 NaN's round trip
    // through float32 is exact); a payload wholly in the dropped bits gets the quiet bit so
    // that the NaN does not become an infinity
    uint32_t m = (mag >> 13) & 0x3ffu;
    if (m == 0) m = 0x200u;
    bits = static_cast<uint16_t>(sign | 0x7c00u | m);
    return;
  }
  if (mag >= 0x477ff000u) { bits = static_cast<uint16_t>(sign | 0x7c00u); return; }  // overflow -> inf
  if (mag < 0x38800000u) {  // subnormal or zero in half
    float af;
    std::memcpy(&af, &mag, 4);
    // scale so that the half subnormal unit (2^-24) becomes 1, then round to even
    float scaled = af * 16777216.0f;
    bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
    return;
  }
  uint32_t exp = (mag >> 23) - 112;
  uint32_t mant = mag & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  bits = static_cast<uint16_t>(sign | h);
}

half::operator float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    float f = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace loom
