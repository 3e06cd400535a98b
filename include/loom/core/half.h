#pragma once
// 16-bit floating storage types. Arithmetic converts to float32; these types exist to store
// tensors compactly and to convert to and from the compute types.
#include <cstdint>
#include <cstring>

#include "loom/core/api.h"

namespace loom {

struct LOOM_API half {
  uint16_t bits = 0;
  half() = default;
  half(float f);  // round to nearest even
  operator float() const;
};

struct LOOM_API bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f) {  // round to nearest even; NaN stays NaN
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      // truncate, keeping the sign, payload and signalling bit (a bfloat16 NaN's round trip
      // through float32 is exact); only a payload that lies wholly in the dropped low bits
      // gets the quiet bit, so that the NaN does not become an infinity
      bits = static_cast<uint16_t>(u >> 16);
      if ((bits & 0x7fu) == 0) bits = static_cast<uint16_t>(bits | 0x40u);
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

}  // namespace loom
