// ZarrArray::ReadWholeChunk: a whole chunk handed over decoded, the same
// bytes Read gives; nullopt whenever that would need a copy.
#include <cstring>
#include <numeric>

#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/zarr/array.h"

namespace cairn {
namespace {

std::shared_ptr<ZarrArray> MakeArray(std::shared_ptr<KvStore> store, ZarrFormat format,
                                     std::string_view metadata) {
  auto json = ParseJson(metadata, "test");
  EXPECT_TRUE(json.ok());
  auto a = ZarrArray::Create(std::move(store), "a/", format, *json);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  // Every element distinct: 9 x 10 int32.
  std::vector<int32_t> values(90);
  std::iota(values.begin(), values.end(), 1);
  EXPECT_TRUE((*a)->Write(Box({0, 0}, {9, 10}), values.data()).ok());
  return *a;
}

// Read's bytes of `box`.
std::vector<uint8_t> ReadBytes(const ZarrArray& a, const Box& box) {
  std::vector<uint8_t> out(static_cast<size_t>(box.num_elements()) * 4);
  EXPECT_TRUE(a.Read(box, out.data()).ok());
  return out;
}

void ExpectHandedOver(const ZarrArray& a, const Box& box) {
  auto got = a.ReadWholeChunk(box);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value()) << box.ToString();
  const std::vector<uint8_t> want = ReadBytes(a, box);
  ASSERT_EQ((*got)->size(), want.size());
  EXPECT_EQ(std::memcmp((*got)->data(), want.data(), want.size()), 0) << box.ToString();
}

void ExpectNotHandedOver(const ZarrArray& a, const Box& box) {
  auto got = a.ReadWholeChunk(box);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->has_value()) << box.ToString();
}

TEST(ZarrWholeChunk, CompressedChunksAreHandedOverOnlyWhole) {
  auto store = std::make_shared<MemoryKvStore>("memory://t/");
  auto a = MakeArray(store, ZarrFormat::kV2,
                     R"({"shape":[9,10],"dtype":"<i4","chunks":[4,5],"compressor":{"id":"zstd","level":1}})");
  ExpectHandedOver(*a, Box({0, 0}, {4, 5}));
  ExpectHandedOver(*a, Box({4, 5}, {4, 5}));
  ExpectNotHandedOver(*a, Box({0, 0}, {4, 10}));  // two chunks
  ExpectNotHandedOver(*a, Box({0, 0}, {2, 5}));   // part of one
  ExpectNotHandedOver(*a, Box({1, 0}, {4, 5}));   // not on the grid
  ExpectNotHandedOver(*a, Box({8, 0}, {1, 5}));   // an edge chunk, clipped
  ExpectNotHandedOver(*a, Box({0, 0}, {4}));      // wrong rank
  // A missing chunk is left to Read (which fills it in place).
  ASSERT_TRUE(store->Delete("a/1.1").ok());
  ExpectNotHandedOver(*a, Box({4, 5}, {4, 5}));
  // A corrupt chunk is an error naming its key, as in Read.
  ASSERT_TRUE(store->Put("a/0.0", AsBytes(std::string("not zstd"))).ok());
  auto bad = a->ReadWholeChunk(Box({0, 0}, {4, 5}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("a/0.0"), std::string::npos) << bad.status().ToString();
}

TEST(ZarrWholeChunk, ShardsOfOneInnerChunkAreHandedOver) {
  auto store = std::make_shared<MemoryKvStore>("memory://t/");
  // As Orbax writes them: one inner chunk per shard, zstd inside.
  auto one = MakeArray(store, ZarrFormat::kV3,
                       R"({"data_type":"int32","shape":[9,10],"chunk_grid":{"name":"regular",)"
                       R"("configuration":{"chunk_shape":[3,5]}},"codecs":[{"name":"sharding_indexed",)"
                       R"("configuration":{"chunk_shape":[3,5],"codecs":[{"name":"bytes"},)"
                       R"({"name":"zstd","configuration":{"level":3}}]}}]})");
  ExpectHandedOver(*one, Box({0, 0}, {3, 5}));
  ExpectHandedOver(*one, Box({6, 5}, {3, 5}));
  // Several inner chunks per shard: left to Read.
  auto several = MakeArray(std::make_shared<MemoryKvStore>("memory://u/"), ZarrFormat::kV3,
                           R"({"data_type":"int32","shape":[9,10],"chunk_grid":{"name":"regular",)"
                           R"("configuration":{"chunk_shape":[3,5]}},"codecs":[{"name":"sharding_indexed",)"
                           R"("configuration":{"chunk_shape":[3,1]}}]})");
  ExpectNotHandedOver(*several, Box({0, 0}, {3, 5}));
  // Control: Read still reads it.
  EXPECT_EQ(ReadBytes(*several, Box({0, 0}, {3, 5})), ReadBytes(*one, Box({0, 0}, {3, 5})));
}

}  // namespace
}  // namespace cairn
