// zarr/stored_chunks.h: chunk keys back to grid cells, and missing chunks
// counted and described as ranges without walking the declared grid.
#include "cairn/zarr/stored_chunks.h"

#include <gtest/gtest.h>

#include <chrono>

#include "cairn/kvstore/memory/memory_kvstore.h"

namespace cairn {
namespace {

ArrayMetadata Md(Shape shape, Shape chunks, ChunkKeyEncoding::Kind kind = ChunkKeyEncoding::Kind::kDefault,
                 char sep = '/') {
  ArrayMetadata md;
  md.shape = std::move(shape);
  md.chunk_shape = std::move(chunks);
  md.chunk_key_encoding.kind = kind;
  md.chunk_key_encoding.separator = sep;
  return md;
}

void Put(KvStore& store, const std::string& key) {
  const uint8_t byte = 1;
  ASSERT_TRUE(store.Put(key, ByteView(&byte, 1)).ok()) << key;
}

TEST(StoredChunks, KeysBackToCells) {
  const ArrayMetadata v3 = Md({10, 6}, {4, 3});
  EXPECT_EQ(CellOfChunkKey(v3, "c/2/1"), (GridCell{2, 1}));
  for (const char* bad : {"c/3/0", "c/0/2", "c/01/0", "c/0", "c/0/0/0", "0/0", "c.0.0", "zarr.json", "c/-1/0", "c/"}) {
    EXPECT_FALSE(CellOfChunkKey(v3, bad)) << bad;
  }
  const ArrayMetadata v2 = Md({10, 6}, {4, 3}, ChunkKeyEncoding::Kind::kV2, '.');
  EXPECT_EQ(CellOfChunkKey(v2, "2.1"), (GridCell{2, 1}));
  EXPECT_FALSE(CellOfChunkKey(v2, ".zarray"));
  EXPECT_FALSE(CellOfChunkKey(v2, "2/1"));
  EXPECT_EQ(CellOfChunkKey(Md({}, {}), "c"), GridCell{});
  EXPECT_EQ(CellOfChunkKey(Md({}, {}, ChunkKeyEncoding::Kind::kV2, '.'), "0"), GridCell{});
}

TEST(StoredChunks, MissingChunksAreNamedFirstThenCountedAsRanges) {
  MemoryKvStore store("memory://sc/");
  const ArrayMetadata md = Md({10, 6}, {4, 3});  // grid 3 x 2
  for (const char* key : {"a/zarr.json", "a/c/0/1", "a/c/2/0", "a/stray", "ab/c/0/0"}) Put(store, key);
  auto chunks = ListStoredChunks(store, "a/", md);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(chunks->cells, 6u);
  EXPECT_EQ(chunks->stored, (std::vector<GridCell>{{0, 1}, {2, 0}}));
  EXPECT_EQ(chunks->missing(), 4u);
  EXPECT_EQ(FirstMissingCells(*chunks, 10), (std::vector<GridCell>{{0, 0}, {1, 0}, {1, 1}, {2, 1}}));
  EXPECT_EQ(FirstMissingCells(*chunks, 2), (std::vector<GridCell>{{0, 0}, {1, 0}}));
  size_t total = 0;
  auto ranges = MissingRanges(*chunks, 10, &total);
  ASSERT_EQ(total, 3u);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[1].first, (GridCell{1, 0}));
  EXPECT_EQ(ranges[1].last, (GridCell{1, 1}));
  EXPECT_EQ(ranges[1].count, 2u);
  EXPECT_EQ(DescribeMissing(*chunks, md, 2),
            "4 of 6 chunks are missing (row-major ranges: c/0/0, c/1/0..c/1/1, and 1 more ranges)");
}

TEST(StoredChunks, AHugeDeclaredGridCostsOnlyTheStoredChunks) {
  MemoryKvStore store("memory://sc/");
  const ArrayMetadata md = Md({Index{1} << 62, 8}, {4, 4});  // 2^61 cells
  Put(store, "c/5/1");
  const auto start = std::chrono::steady_clock::now();
  auto chunks = ListStoredChunks(store, "", md);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(chunks->cells, uint64_t{1} << 61);
  EXPECT_EQ(chunks->missing(), (uint64_t{1} << 61) - 1);
  EXPECT_EQ(FirstMissingCells(*chunks, 3), (std::vector<GridCell>{{0, 0}, {0, 1}, {1, 0}}));
  EXPECT_EQ(DescribeMissing(*chunks, md),
            "2305843009213693951 of 2305843009213693952 chunks are missing (row-major ranges: "
            "c/0/0..c/5/0, c/6/0..c/1152921504606846975/1)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

}  // namespace
}  // namespace cairn
