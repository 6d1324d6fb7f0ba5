// A ZarrArray read of many chunks inside an OCDBT database (also below an
// `|ocdbt:path/` prefix) is one GetMany: the manifest is read once for the
// whole read, not once per chunk (or per round of chunk reads). The values
// are checked on the batched path for whole chunks, part chunks with other
// strides, missing chunks (fill value) and compressed chunks. Control: on a
// plain store every chunk is still a Get of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/read_batching.h"
#include "cairn/zarr/array.h"

namespace cairn {
namespace {

constexpr Index kRows = 64, kCols = 16;  // chunks of 8 x 16: 8 chunks

Json Metadata(bool compressed) {
  std::string codecs = R"({"name": "bytes", "configuration": {"endian": "little"}})";
  if (compressed) codecs += R"(, {"name": "gzip"})";
  auto j = ParseJson(R"({"shape": [64, 16], "data_type": "float32", "chunk_grid": {"name": "regular",
      "configuration": {"chunk_shape": [8, 16]}}, "fill_value": -1, "codecs": [)" + codecs + "]}",
                     "test metadata");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : Json();
}

// Counts Gets of the OCDBT manifest and of chunk keys.
class CountingStore : public MemoryKvStore {
 public:
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range) override {
    if (key == "manifest.ocdbt") ++manifest_gets;
    if (key.find("c/") == 0) ++chunk_gets;
    return MemoryKvStore::Get(key, range);
  }
  std::atomic<int> manifest_gets{0};
  std::atomic<int> chunk_gets{0};
};

// Rows [0, 48) hold 1000 + index; rows [48, 64) (chunks 6 and 7) were
// never written, so they read as the fill value.
std::vector<float> Stored() {
  std::vector<float> v(kRows * kCols, -1.0f);
  for (Index i = 0; i < 48 * kCols; ++i) v[i] = 1000.0f + static_cast<float>(i);
  return v;
}

class OcdbtArrayRead : public ::testing::TestWithParam<bool> {};

TEST_P(OcdbtArrayRead, ManyChunksReadTheManifestOnce) {
  auto base = std::make_shared<CountingStore>();
  auto db = std::make_shared<ocdbt::OcdbtKvStore>(base, ocdbt::OcdbtOptions{});
  auto store = MakePrefixKvStore(db, "arr/");  // as `memory://|ocdbt:arr/|zarr3:`
  EXPECT_TRUE(PrefersBatchedReads(*store));
  EXPECT_TRUE(PrefersBatchedReads(*db));
  auto array = ZarrArray::Create(store, "", ZarrFormat::kV3, Metadata(GetParam()));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const std::vector<float> stored = Stored();
  ASSERT_TRUE((*array)->Write(Box({0, 0}, {48, kCols}), stored.data()).ok());

  // The whole array, 8 chunks (2 missing).
  base->manifest_gets = 0;
  std::vector<float> out(kRows * kCols, 0.0f);
  ASSERT_TRUE((*array)->Read(Box::FromShape({kRows, kCols}), out.data()).ok());
  EXPECT_EQ(base->manifest_gets.load(), 1);
  EXPECT_EQ(out, stored);

  // Part of every chunk it touches, into a destination with other strides
  // (a column-major 30 x 5 box across 5 chunks, one of them missing).
  base->manifest_gets = 0;
  const Index r0 = 21, c0 = 3, rows = 30, cols = 5;
  std::vector<float> part(rows * cols, 0.0f);
  StridedLayout layout;
  layout.byte_strides = {static_cast<Index>(sizeof(float)), static_cast<Index>(rows * sizeof(float))};
  ASSERT_TRUE((*array)->Read(Box({r0, c0}, {rows, cols}), part.data(), layout).ok());
  EXPECT_EQ(base->manifest_gets.load(), 1);
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) {
      ASSERT_EQ(part[c * rows + r], stored[(r0 + r) * kCols + c0 + c]) << r << "," << c;
    }
  }

  // A chunk whose stored bytes are corrupt fails the read, naming the key.
  ASSERT_TRUE(db->Put("arr/c/0/0", AsBytes("not a chunk")).ok());
  Status bad = (*array)->Read(Box::FromShape({kRows, kCols}), out.data());
  EXPECT_EQ(bad.code(), StatusCode::kDataLoss) << bad.ToString();
  EXPECT_NE(bad.message().find("c/0/0"), std::string_view::npos) << bad.ToString();
}

INSTANTIATE_TEST_SUITE_P(Codecs, OcdbtArrayRead, ::testing::Bool());

TEST(PlainStoreArrayRead, EveryChunkIsItsOwnGet) {
  auto store = std::make_shared<CountingStore>();
  EXPECT_FALSE(PrefersBatchedReads(*store));
  EXPECT_FALSE(PrefersBatchedReads(*MakePrefixKvStore(store, "x/")));
  auto array = ZarrArray::Create(store, "", ZarrFormat::kV3, Metadata(true));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const std::vector<float> stored = Stored();
  ASSERT_TRUE((*array)->Write(Box({0, 0}, {48, kCols}), stored.data()).ok());
  store->chunk_gets = 0;
  std::vector<float> out(kRows * kCols, 0.0f);
  ASSERT_TRUE((*array)->Read(Box::FromShape({kRows, kCols}), out.data()).ok());
  EXPECT_EQ(store->chunk_gets.load(), 8);
  EXPECT_EQ(out, stored);
}

}  // namespace
}  // namespace cairn
