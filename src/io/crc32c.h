#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TensorBoard's record
// framing. Debian 12 packages no CRC-32C library (crc32 in zlib is the other polynomial), so it
// is computed here: eight tables, eight bytes a step.
#include <cstdint>
#include <string_view>

#include "loom/core/api.h"

namespace loom::detail {

LOOM_INTERNAL uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);
// The record framing's masked form: rotated right by 15 bits plus a constant, so that a CRC of
// data that holds CRCs is not itself trivially structured.
inline uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

}  // namespace loom::detail
