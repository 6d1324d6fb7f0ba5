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

// Saves `values` ([rows, cols] float32, C order) as `params.w` of a new
// item at `r.directory` (with `r`'s options), from one process, one chunk
// (and shard) per `chunk_rows` whole rows.
inline void SaveRowChunks(SaveRequest r, const std::vector<float>& values, Index rows, Index cols,
                          Index chunk_rows) {
  SaveLeaf leaf = ArrayLeaf("w", {rows, cols}, {chunk_rows, cols});
  for (Index row = 0; row < rows; row += chunk_rows) {
    leaf.shards.push_back(Shard(values, {rows, cols}, Box({row, 0}, {chunk_rows, cols})));
  }
  r.leaves = {leaf};
  auto coordinator = NewSingleProcessCoordinator();
  Status st = Save(r, *coordinator);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// The same at `dir`, with the default options (zstd).
inline void SaveRowChunks(const std::string& dir, const std::vector<float>& values, Index rows, Index cols,
                          Index chunk_rows) {
  SaveRequest r;
  r.directory = dir;
  SaveRowChunks(std::move(r), values, rows, cols, chunk_rows);
}

// The regular files directly in `dir`.
inline size_t FilesIn(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

}  // namespace cairn::engine::testing
