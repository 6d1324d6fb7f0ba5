// Commits start from the manifest their store object last read or wrote
// (commit protocol step 1 in ocdbt_commit.cc), as TensorStore's do: a save
// of an array into a fresh database (the metadata document with
// PutIfAbsent, then the chunks through the batch writer) reads the manifest
// once, not once per commit and per question about the config. The
// conditional manifest write still catches every commit another writer made
// in between: those commits are kept, a PutIfAbsent of a key the other
// writer added answers false, and one of a key it removed answers true
// (a "no" always comes from a fresh read). Controls: a store pinned at a
// generation and a numbered-manifest database read the manifest as before.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "cairn/kvstore/batch_writer.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

namespace cairn::ocdbt {
namespace {

// Counts Gets of the single manifest.
class CountingStore : public MemoryKvStore {
 public:
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range) override {
    if (key == "manifest.ocdbt") ++manifest_gets;
    return MemoryKvStore::Get(key, range);
  }
  std::atomic<int> manifest_gets{0};
};

std::string Value(int i) { return std::string(3000, static_cast<char>('a' + i % 26)); }

std::string Read(KvStore& s, const std::string& key) {
  auto v = s.Get(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() && v->has_value() ? (*v)->ToString() : std::string("<none>");
}

TEST(OcdbtCommitManifestReads, ArraySaveIntoAFreshDatabaseReadsTheManifestOnce) {
  auto base = std::make_shared<CountingStore>();
  auto db = std::make_shared<OcdbtKvStore>(base, OcdbtOptions{});
  auto created = db->PutIfAbsent("arr/zarr.json", AsBytes("{}"));
  ASSERT_TRUE(created.ok() && *created) << created.status().ToString();
  auto writer = NewBatchWriter(db);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(writer->Add("arr/c/" + std::to_string(i), AsBytes(Value(i))).ok());
  }
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(base->manifest_gets.load(), 1);  // the first commit's step 1
  auto m = db->ReadManifest();
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((*m)->latest_generation(), 2u);  // control: two commits were made
  // Control: the values are there for a fresh reader.
  OcdbtKvStore reader(base, OcdbtOptions{});
  EXPECT_EQ(Read(reader, "arr/zarr.json"), "{}");
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Read(reader, "arr/c/" + std::to_string(i)), Value(i));
}

TEST(OcdbtCommitManifestReads, CommitsOfAnotherWriterInBetweenAreKept) {
  auto base = std::make_shared<CountingStore>();
  OcdbtKvStore a(base, OcdbtOptions{});
  ASSERT_TRUE(a.Put("a/0", AsBytes("a0")).ok());  // a now knows generation 1
  OcdbtKvStore b(base, OcdbtOptions{});
  ASSERT_TRUE(b.Put("b/0", AsBytes("b0")).ok());  // generation 2, unknown to a
  ASSERT_TRUE(b.Put("gone", AsBytes("x")).ok());
  ASSERT_TRUE(b.Delete("gone").ok());

  // a's next commit starts from generation 1, loses the conditional write,
  // reads the manifest again and commits on top of b's generations.
  ASSERT_TRUE(a.Put("a/1", AsBytes("a1")).ok());
  OcdbtKvStore reader(base, OcdbtOptions{});
  EXPECT_EQ(Read(reader, "a/0"), "a0");
  EXPECT_EQ(Read(reader, "a/1"), "a1");
  EXPECT_EQ(Read(reader, "b/0"), "b0");  // not lost

  // b adds a key behind a's back: a's PutIfAbsent of it must answer false
  // (its known tree lacks the key; the manifest write then fails and the
  // retry sees the key).
  ASSERT_TRUE(b.Put("k", AsBytes("from b")).ok());
  auto put = a.PutIfAbsent("k", AsBytes("from a"));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_FALSE(*put);
  EXPECT_EQ(Read(reader, "k"), "from b");

  // b removes it behind a's back: a's known tree still has it, but the
  // answer comes from a fresh read, so the PutIfAbsent succeeds.
  ASSERT_TRUE(b.Delete("k").ok());
  put = a.PutIfAbsent("k", AsBytes("from a"));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(*put);
  EXPECT_EQ(Read(reader, "k"), "from a");
  EXPECT_EQ(Read(reader, "b/0"), "b0");
}

TEST(OcdbtCommitManifestReads, ConsecutiveCommitsOfOneWriterReadNoManifest) {
  auto base = std::make_shared<CountingStore>();
  OcdbtKvStore db(base, OcdbtOptions{});
  ASSERT_TRUE(db.Put("k/0", AsBytes(Value(0))).ok());
  const int after_first = base->manifest_gets.load();
  EXPECT_EQ(after_first, 1);
  for (int i = 1; i < 5; ++i) ASSERT_TRUE(db.Put("k/" + std::to_string(i), AsBytes(Value(i))).ok());
  EXPECT_EQ(base->manifest_gets.load(), after_first);

  // Control: the numbered manifest kind is not remembered (its commit
  // writes manifest.<generation> with PutIfAbsent): each commit reads.
  auto numbered_base = std::make_shared<CountingStore>();
  OcdbtOptions options;
  options.config.manifest_kind = ManifestKind::kNumbered;
  OcdbtKvStore numbered(numbered_base, options);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(numbered.Put("k/" + std::to_string(i), AsBytes(Value(i))).ok());
  }
  EXPECT_GE(numbered_base->manifest_gets.load(), 3);
  OcdbtKvStore reader(numbered_base, options);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Read(reader, "k/" + std::to_string(i)), Value(i));
}

}  // namespace
}  // namespace cairn::ocdbt
