// EncodeChunk produces exactly the bytes ZarrArray::Write stores.
#include "cairn/zarr/chunk_encoder.h"

#include <gtest/gtest.h>

#include <numeric>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/zarr/array.h"

namespace cairn {
namespace {

void ExpectSameAsArrayWrite(ZarrFormat format, const Json& partial) {
  auto store = std::make_shared<MemoryKvStore>();
  CreateOptions create;
  create.store_data_equal_to_fill_value = true;
  auto array = ZarrArray::Create(store, "a/", format, partial, create);
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const ArrayMetadata& m = (*array)->metadata();
  std::vector<int32_t> data(NumElements(m.shape));
  std::iota(data.begin(), data.end(), 7);
  ASSERT_TRUE((*array)->Write(Box::FromShape(m.shape), data.data()).ok());
  // Every cell of the grid, including the edge cells sticking out.
  std::vector<Index> cell(m.shape.size(), 0);
  int checked = 0;
  for (Index i = 0; i * m.chunk_shape[0] < m.shape[0]; ++i) {
    for (Index j = 0; j * m.chunk_shape[1] < m.shape[1]; ++j) {
      cell = {i, j};
      const Box valid = ChunkValidBox(m, cell);
      std::vector<int32_t> part(valid.num_elements());
      CopyBoxIntersection(data.data(), Box::FromShape(m.shape), part.data(), valid, sizeof(int32_t));
      ByteView in(reinterpret_cast<const uint8_t*>(part.data()), part.size() * 4);
      auto encoded = EncodeChunk(m, cell, in, true);
      ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
      auto stored = store->Get("a/" + encoded->key);
      ASSERT_TRUE(stored.ok() && stored->has_value()) << encoded->key;
      ByteView got = encoded->as_is ? in : encoded->bytes.view();
      EXPECT_EQ(AsStringView(got), (*stored)->as_string_view()) << encoded->key;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 9);  // 3 x 3 cells
}

TEST(ChunkEncoder, MatchesZarrArrayWriteV3Sharded) {
  ExpectSameAsArrayWrite(ZarrFormat::kV3, Json::parse(R"({
    "shape": [5, 7], "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 3],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 3, "checksum": true}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]})"));
}

TEST(ChunkEncoder, MatchesZarrArrayWriteV3Plain) {
  ExpectSameAsArrayWrite(ZarrFormat::kV3, Json::parse(R"({
    "shape": [5, 7], "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}}})"));
}

TEST(ChunkEncoder, MatchesZarrArrayWriteV2Zstd) {
  ExpectSameAsArrayWrite(ZarrFormat::kV2, Json::parse(R"({
    "shape": [5, 7], "chunks": [2, 3], "dtype": "<i4", "compressor": {"id": "zstd", "level": 1},
    "fill_value": null, "order": "C"})"));
}

TEST(ChunkEncoder, RejectsWrongSizesAndCellsOutsideTheGrid) {
  auto m = MetadataFromPartial(ZarrFormat::kV3, Json::parse(R"({"shape": [5, 7], "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}}})"));
  ASSERT_TRUE(m.ok());
  std::vector<uint8_t> whole(2 * 3 * 4, 1), edge(1 * 1 * 4, 1);
  std::vector<Index> ok_cell = {0, 0}, edge_cell = {2, 2}, outside = {3, 0};
  auto good = EncodeChunk(*m, ok_cell, whole, false);  // control
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good->as_is);
  EXPECT_EQ(good->key, "c/0/0");
  auto edge_ok = EncodeChunk(*m, edge_cell, edge, true);  // control: padded to the chunk
  ASSERT_TRUE(edge_ok.ok());
  EXPECT_EQ(edge_ok->bytes.size(), whole.size());
  auto wrong = EncodeChunk(*m, ok_cell, edge, false);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("4 bytes"), std::string_view::npos) << wrong.status().ToString();
  auto out = EncodeChunk(*m, outside, edge, false);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("outside the chunk grid"), std::string_view::npos);
  // All-fill chunks are omitted unless store_fill (control: stored above).
  std::vector<uint8_t> zeros(whole.size(), 0);
  auto omitted = EncodeChunk(*m, ok_cell, zeros, false);
  ASSERT_TRUE(omitted.ok());
  EXPECT_TRUE(omitted->omit);
}

}  // namespace
}  // namespace cairn
