#include "cairn/util/xxhash64.h"

#include <cstring>

namespace cairn {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads (the specification reads lanes as little-endian).
uint64_t Load64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t Load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

uint64_t Round(uint64_t acc, uint64_t lane) {
  acc += lane * kPrime2;
  acc = Rotl(acc, 31);
  return acc * kPrime1;
}

uint64_t MergeAccumulator(uint64_t acc, uint64_t lane_acc) {
  acc ^= Round(0, lane_acc);
  return acc * kPrime1 + kPrime4;
}

}  // namespace

uint64_t Xxh64(ByteView data, uint64_t seed) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  uint64_t acc;
  if (n >= 32) {
    // Step 1-2: four lanes over 32-byte stripes.
    uint64_t a1 = seed + kPrime1 + kPrime2, a2 = seed + kPrime2, a3 = seed, a4 = seed - kPrime1;
    while (n >= 32) {
      a1 = Round(a1, Load64(p));
      a2 = Round(a2, Load64(p + 8));
      a3 = Round(a3, Load64(p + 16));
      a4 = Round(a4, Load64(p + 24));
      p += 32;
      n -= 32;
    }
    // Step 3: converge.
    acc = Rotl(a1, 1) + Rotl(a2, 7) + Rotl(a3, 12) + Rotl(a4, 18);
    acc = MergeAccumulator(acc, a1);
    acc = MergeAccumulator(acc, a2);
    acc = MergeAccumulator(acc, a3);
    acc = MergeAccumulator(acc, a4);
  } else {
    acc = seed + kPrime5;
  }
  // Step 4: the input length.
  acc += static_cast<uint64_t>(data.size());
  // Step 5: the remaining bytes.
  while (n >= 8) {
    acc ^= Round(0, Load64(p));
    acc = Rotl(acc, 27) * kPrime1 + kPrime4;
    p += 8;
    n -= 8;
  }
  if (n >= 4) {
    acc ^= static_cast<uint64_t>(Load32(p)) * kPrime1;
    acc = Rotl(acc, 23) * kPrime2 + kPrime3;
    p += 4;
    n -= 4;
  }
  while (n > 0) {
    acc ^= static_cast<uint64_t>(*p) * kPrime5;
    acc = Rotl(acc, 11) * kPrime1;
    ++p;
    --n;
  }
  // Step 6: avalanche.
  acc ^= acc >> 33;
  acc *= kPrime2;
  acc ^= acc >> 29;
  acc *= kPrime3;
  acc ^= acc >> 32;
  return acc;
}

}  // namespace cairn
