// Random test data for the engine's tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace cairn::engine::testing {

// `n` float32 values from a normal distribution (no NaNs, so values compare
// simply after a cast), as bytes.
inline std::vector<uint8_t> RandomFloatBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<uint8_t> v(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float f = dist(rng);
    std::memcpy(&v[i * 4], &f, 4);
  }
  return v;
}

}  // namespace cairn::engine::testing
