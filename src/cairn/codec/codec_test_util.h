// Helpers shared by the codec layer's tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/codec/codec.h"

namespace cairn::codec_test {

inline ChunkSpec MakeSpec(DType dtype, Shape shape, uint8_t fill_byte = 0) {
  return ChunkSpec{dtype, std::move(shape), std::vector<uint8_t>(DTypeSize(dtype), fill_byte)};
}

// Deterministic pseudo-random bytes; `runs` makes them compressible.
inline Buffer RandomBytes(size_t n, uint32_t seed, bool runs = false) {
  std::mt19937 rng(seed);
  Buffer b(n);
  for (size_t i = 0; i < n; ++i) {
    b.data()[i] = runs ? static_cast<uint8_t>((i / 37) % 7) : static_cast<uint8_t>(rng());
  }
  return b;
}

inline Buffer FromHex(std::string_view hex) {
  Buffer b(hex.size() / 2);
  for (size_t i = 0; i < b.size(); ++i) {
    b.data()[i] = static_cast<uint8_t>(std::stoi(std::string(hex.substr(2 * i, 2)), nullptr, 16));
  }
  return b;
}

inline std::string ToHex(ByteView b) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

inline Json ParseOrDie(std::string_view text) { return Json::parse(text); }

}  // namespace cairn::codec_test
