// Each store answers for itself (KvStore::Capabilities, OpenBatchWriter):
// file and memory rename prefixes into place, OCDBT commits in place with a
// batch writer of its own and batched reads, a prefix view answers as its
// base and hands out its base's batch writer with the prefix added, and a
// forwarding wrapper keeps writes on its own Put (no batch writer).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "cairn/kvstore/batch_writer.h"
#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/forwarding_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/read_batching.h"
#include "cairn/kvstore/testing/fault_kvstore.h"

namespace cairn {
namespace {

bool Has(KvStore& store, const std::string& key) {
  auto r = store.Get(key);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() && r->has_value();
}

TEST(StoreCapabilities, FileAndMemoryRenameIntoPlace) {
  std::string dir = (std::filesystem::temp_directory_path() / ("cairn_caps_" + std::to_string(::getpid()))).string();
  FileKvStore file(dir);
  MemoryKvStore memory;
  for (KvStore* s : {static_cast<KvStore*>(&file), static_cast<KvStore*>(&memory)}) {
    StoreCapabilities c = s->Capabilities();
    EXPECT_FALSE(c.commits_in_place) << s->url();
    EXPECT_FALSE(c.batch_writer) << s->url();
    EXPECT_FALSE(c.batched_reads) << s->url();
    EXPECT_EQ(s->OpenBatchWriter(), nullptr) << s->url();
    // What BeginPrefixCommit does agrees with the answer.
    auto commit = s->BeginPrefixCommit("final/", "pending/");
    ASSERT_TRUE(commit.ok()) << commit.status().ToString();
    EXPECT_EQ(commit->in_place, c.commits_in_place) << s->url();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(StoreCapabilities, OcdbtCommitsInPlaceWithItsOwnBatchWriter) {
  auto db = std::make_shared<ocdbt::OcdbtKvStore>(std::make_shared<MemoryKvStore>(), ocdbt::OcdbtOptions{});
  StoreCapabilities c = db->Capabilities();
  EXPECT_TRUE(c.commits_in_place);
  EXPECT_TRUE(c.batch_writer);
  EXPECT_TRUE(c.batched_reads);
  auto commit = db->BeginPrefixCommit("final/", "pending/");
  ASSERT_TRUE(commit.ok()) << commit.status().ToString();
  EXPECT_TRUE(commit->in_place);
  // A store not owned by a shared_ptr has no writer to hand out.
  ocdbt::OcdbtKvStore unowned(std::make_shared<MemoryKvStore>(), ocdbt::OcdbtOptions{});
  EXPECT_EQ(unowned.OpenBatchWriter(), nullptr);
}

TEST(StoreCapabilities, PrefixViewAnswersAsItsBaseAndBatchesThroughIt) {
  auto db = std::make_shared<ocdbt::OcdbtKvStore>(std::make_shared<MemoryKvStore>(), ocdbt::OcdbtOptions{});
  auto view = std::make_shared<PrefixKvStore>(db, "p/");
  StoreCapabilities c = view->Capabilities();
  EXPECT_TRUE(c.commits_in_place);
  EXPECT_TRUE(c.batch_writer);
  EXPECT_TRUE(PrefersBatchedReads(*view));
  // The view's writer is OCDBT's: nothing is visible before Commit, then
  // every value is, under the prefix.
  std::unique_ptr<KvBatchWriter> w = NewBatchWriter(view);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->Add("a", AsBytes("1")).ok());
  ASSERT_TRUE(w->Add("b/c", AsBytes("22")).ok());
  EXPECT_FALSE(Has(*db, "p/a"));
  ASSERT_TRUE(w->Commit().ok());
  EXPECT_TRUE(Has(*db, "p/a"));
  EXPECT_TRUE(Has(*db, "p/b/c"));
  // Keys are checked before the prefix is added.
  std::unique_ptr<KvBatchWriter> bad = NewBatchWriter(view);
  Status s = bad->Add("../x", AsBytes("1"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();

  auto over_memory = std::make_shared<PrefixKvStore>(std::make_shared<MemoryKvStore>(), "p/");
  EXPECT_FALSE(over_memory->Capabilities().commits_in_place);
  EXPECT_FALSE(over_memory->Capabilities().batch_writer);
  EXPECT_FALSE(PrefersBatchedReads(*over_memory));
}

// A wrapper that changes writes: batches must go through its Put.
class CountingPuts final : public ForwardingKvStore {
 public:
  using ForwardingKvStore::ForwardingKvStore;
  Status Put(std::string_view key, ByteView value) override {
    ++puts;
    return base_->Put(key, value);
  }
  int puts = 0;
};

TEST(StoreCapabilities, WrappersKeepWritesOnTheirOwnCalls) {
  auto db = std::make_shared<ocdbt::OcdbtKvStore>(std::make_shared<MemoryKvStore>(), ocdbt::OcdbtOptions{});
  auto counting = std::make_shared<CountingPuts>(db);
  StoreCapabilities c = counting->Capabilities();
  EXPECT_TRUE(c.commits_in_place);
  EXPECT_FALSE(c.batch_writer);
  EXPECT_TRUE(c.batched_reads);  // GetMany is forwarded
  std::unique_ptr<KvBatchWriter> w = NewBatchWriter(counting);
  ASSERT_TRUE(w->Add("a", AsBytes("1")).ok());
  EXPECT_EQ(counting->puts, 1);
  EXPECT_TRUE(Has(*db, "a"));  // a Put: visible at once

  auto fault = std::make_shared<FaultKvStore>(db);
  EXPECT_TRUE(fault->Capabilities().commits_in_place);
  EXPECT_FALSE(fault->Capabilities().batch_writer);
  auto fault_memory = std::make_shared<FaultKvStore>(std::make_shared<MemoryKvStore>());
  EXPECT_FALSE(fault_memory->Capabilities().commits_in_place);
}

}  // namespace
}  // namespace cairn
