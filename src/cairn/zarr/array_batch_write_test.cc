// A ZarrArray write of many chunks goes through one KvBatchWriter: inside an
// OCDBT database (also below an `|ocdbt:path/` prefix) the whole write is
// one commit, one new generation, instead of one per chunk. Controls: the
// same chunks written one Write at a time make one generation each, and on a
// plain store every chunk is still a Put of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/zarr/array.h"

namespace cairn {
namespace {

constexpr Index kRows = 64, kChunkRows = 8, kCols = 16;  // 8 chunks

std::vector<float> Values(float base) {
  std::vector<float> v(kRows * kCols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  return v;
}

Json Metadata(bool compressed) {
  std::string codecs = R"({"name": "bytes", "configuration": {"endian": "little"}})";
  if (compressed) codecs += R"(, {"name": "gzip"})";
  auto j = ParseJson(R"({"shape": [64, 16], "data_type": "float32", "chunk_grid": {"name": "regular",
      "configuration": {"chunk_shape": [8, 16]}}, "codecs": [)" + codecs + "]}",
                     "test metadata");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : Json();
}

uint64_t Generation(ocdbt::OcdbtKvStore& db) {
  auto m = db.ReadManifest();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() && m->has_value() ? (*m)->latest_generation() : 0;
}

std::vector<float> ReadAll(const ZarrArray& a) {
  std::vector<float> out(kRows * kCols, -1);
  Status s = a.Read(Box::FromShape({kRows, kCols}), out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

class OcdbtArrayWrite : public ::testing::TestWithParam<bool> {};

TEST_P(OcdbtArrayWrite, ManyChunksAreOneCommit) {
  auto base = std::make_shared<MemoryKvStore>();
  auto db = std::make_shared<ocdbt::OcdbtKvStore>(base, ocdbt::OcdbtOptions{});
  // As `memory://|ocdbt:arr/|zarr3:` opens it: a prefix view of the database.
  auto store = MakePrefixKvStore(db, "arr/");
  auto array = ZarrArray::Create(store, "", ZarrFormat::kV3, Metadata(GetParam()));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const uint64_t created = Generation(*db);
  ASSERT_EQ(created, 1u);  // the metadata document

  const std::vector<float> data = Values(1);
  ASSERT_TRUE((*array)->Write(Box::FromShape({kRows, kCols}), data.data()).ok());
  EXPECT_EQ(Generation(*db), created + 1);  // 8 chunks, one generation
  EXPECT_EQ(ReadAll(**array), data);
  auto keys = db->List("arr/c/");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 8u);

  // Control: the same chunks one Write each make one generation each.
  const std::vector<float> again = Values(1000);
  for (Index r = 0; r < kRows; r += kChunkRows) {
    Box box({r, 0}, {kChunkRows, kCols});
    ASSERT_TRUE((*array)->Write(box, again.data() + r * kCols).ok());
  }
  EXPECT_EQ(Generation(*db), created + 1 + 8);
  EXPECT_EQ(ReadAll(**array), again);

  // Chunks equal to the fill value are removed in the same single commit,
  // beside chunks that are stored.
  std::vector<float> half(kRows * kCols, 0.0f);
  for (Index i = 0; i < kRows / 2 * kCols; ++i) half[i] = 7.0f;
  ASSERT_TRUE((*array)->Write(Box::FromShape({kRows, kCols}), half.data()).ok());
  EXPECT_EQ(Generation(*db), created + 1 + 8 + 1);
  EXPECT_EQ(ReadAll(**array), half);
  keys = db->List("arr/c/");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 4u);  // the zero half is gone
}

INSTANTIATE_TEST_SUITE_P(Codecs, OcdbtArrayWrite, ::testing::Bool());

// A store that counts Puts of chunks, to show the plain-store path.
class CountingStore : public MemoryKvStore {
 public:
  Status Put(std::string_view key, ByteView value) override {
    if (key.find("c/") == 0) ++chunk_puts;
    return MemoryKvStore::Put(key, value);
  }
  std::atomic<int> chunk_puts{0};
};

TEST(PlainStoreArrayWrite, EveryChunkIsItsOwnPut) {
  auto store = std::make_shared<CountingStore>();
  auto array = ZarrArray::Create(store, "", ZarrFormat::kV3, Metadata(false));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const std::vector<float> data = Values(1);
  ASSERT_TRUE((*array)->Write(Box::FromShape({kRows, kCols}), data.data()).ok());
  EXPECT_EQ(store->chunk_puts.load(), 8);
  EXPECT_EQ(ReadAll(**array), data);
}

// A failing chunk write leaves the database as it was: nothing of the write
// is committed, and the error names the chunk.
TEST(OcdbtArrayWriteFailure, NothingCommittedWhenAChunkFails) {
  auto base = std::make_shared<MemoryKvStore>();
  auto db = std::make_shared<ocdbt::OcdbtKvStore>(base, ocdbt::OcdbtOptions{});
  auto array = ZarrArray::Create(db, "a/", ZarrFormat::kV3, Metadata(false));
  ASSERT_TRUE(array.ok());
  const uint64_t created = Generation(*db);
  const std::vector<float> data = Values(1);
  // Control: a write inside the shape succeeds with one commit.
  ASSERT_TRUE((*array)->Write(Box::FromShape({kRows, kCols}), data.data()).ok());
  EXPECT_EQ(Generation(*db), created + 1);
  // A database opened read-only at a generation refuses the commit.
  ocdbt::OcdbtOptions pinned;
  pinned.generation = created + 1;
  auto old = std::make_shared<ocdbt::OcdbtKvStore>(base, pinned);
  auto reopened = ZarrArray::Open(old, "a/");
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  Status s = (*reopened)->Write(Box::FromShape({kRows, kCols}), Values(5).data());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("read-only"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(Generation(*db), created + 1);
  EXPECT_EQ(ReadAll(**array), data);
}

}  // namespace
}  // namespace cairn
