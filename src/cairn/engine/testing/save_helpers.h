// Helpers for the engine's save and restore tests: temporary directories,
// leaves and shards over caller-owned float data.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/engine/save.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::engine::testing {

// The location of a local directory (the test's paths).
inline orbax::Location Loc(const std::string& path) {
  auto loc = orbax::OpenLocation(path);
  EXPECT_TRUE(loc.ok()) << loc.status().ToString();
  return loc.ok() ? *loc : orbax::Location{};
}

inline std::string TempDir(const std::string& name) { return ::cairn::testing::TestDir("cairn_engine_test", name); }

inline std::vector<float> Iota(size_t n, float start = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

inline SaveLeaf ArrayLeaf(const std::string& name, Shape shape, Shape write_shape = {}) {
  SaveLeaf l;
  l.path = {{"params", orbax::KeyType::kDict}, {name, orbax::KeyType::kDict}};
  l.dtype = DType::kFloat32;
  l.shape = std::move(shape);
  l.write_shape = std::move(write_shape);
  return l;
}

inline ShardToSave Shard(const std::vector<float>& full, const Shape& shape, Box box, int replica = 0) {
  // Points into `full` (C order over `shape`) with strides.
  ShardToSave s;
  auto strides = CStrides(shape, sizeof(float));
  const uint8_t* p = reinterpret_cast<const uint8_t*>(full.data());
  for (size_t d = 0; d < shape.size(); ++d) p += box.origin[d] * strides[d];
  s.box = std::move(box);
  s.data = p;
  s.byte_strides = strides;
  s.replica_id = replica;
  return s;
}

}  // namespace cairn::engine::testing
