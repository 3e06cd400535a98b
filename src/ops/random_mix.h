#pragma once
// The hash behind every random draw (Generator::mix), inline for the kernels that call it per
// element.
#include <cstdint>

namespace loom::detail {

// splitmix64's finaliser over a combination of the two words.
inline uint64_t random_mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  z += a * 0xd6e8feb86659fd93ull;
  z = (z ^ (z >> 32)) * 0xd6e8feb86659fd93ull;
  return z ^ (z >> 32);
}

}  // namespace loom::detail
