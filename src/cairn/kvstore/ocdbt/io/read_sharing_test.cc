// Concurrent reads of an OCDBT database share their manifest and B+tree node
// reads (what makes a restore of many chunks over an object store cost about
// one request per chunk): N Gets started together read the manifest at most
// twice, and a node that many lookups miss at once is read once. Controls:
// Gets one after the other each read the manifest (a read never answers from
// a manifest read that started before it), and a failed node read is not
// shared with a later caller. Gates wait on the store's own counters of
// waiting readers, so nothing depends on timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

namespace cairn::ocdbt {
namespace {

constexpr int kReaders = 16;

// Counts Gets of the manifest; the first manifest Get
// after Arm() is held until `release()` says so (or 30 s pass).
class GatedStore : public MemoryKvStore {
 public:
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range) override {
    if (key == "manifest.ocdbt") {
      ++manifest_gets;
      bool hold = armed_.exchange(false);
      if (hold) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!release() && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
      }
    }
    return MemoryKvStore::Get(key, range);
  }
  void Arm() { armed_ = true; }
  std::function<bool()> release = [] { return true; };
  std::atomic<int> manifest_gets{0};

 private:
  std::atomic<bool> armed_{false};
};

std::string Key(int i) { return "c/" + std::to_string(i); }
std::string Value(int i) { return std::string(2000, static_cast<char>('a' + i % 26)); }

TEST(OcdbtReadSharing, ConcurrentGetsShareManifestReads) {
  auto base = std::make_shared<GatedStore>();
  auto db = std::make_shared<OcdbtKvStore>(base, OcdbtOptions{});
  std::vector<KvMutation> batch;
  for (int i = 0; i < kReaders; ++i) batch.push_back({Key(i), Buffer::CopyOf(Value(i))});
  ASSERT_TRUE(db->ApplyBatch(std::move(batch)).ok());

  // Control: Gets one after the other read the manifest once each.
  base->manifest_gets = 0;
  for (int i = 0; i < kReaders; ++i) {
    auto v = db->Get(Key(i));
    ASSERT_TRUE(v.ok() && v->has_value());
  }
  EXPECT_EQ(base->manifest_gets.load(), kReaders);

  // Concurrent: the first manifest read is held until every other reader
  // waits for it; they are then served by one more read.
  base->manifest_gets = 0;
  base->release = [&] { return db->reads_waiting_for_manifest() == kReaders - 1; };
  base->Arm();
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&, i] {
      auto v = db->Get(Key(i));
      if (v.ok() && v->has_value() && (*v)->ToString() == Value(i)) ++right;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), kReaders);
  EXPECT_LE(base->manifest_gets.load(), 2);
  EXPECT_GE(base->manifest_gets.load(), 1);

  // A write made before a read started is seen by it (reads stay fresh).
  ASSERT_TRUE(db->Put(Key(0), AsBytes("new")).ok());
  auto v = db->Get(Key(0));
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->ToString(), "new");
}

BtreeNode Leaf() {
  BtreeNode node;
  node.height = 0;
  node.leaf_entries.push_back({"k", LeafValue{true, "v", {}}});
  return node;
}

TEST(NodeCacheSharing, ConcurrentMissesReadOnce) {
  NodeCache cache;
  IndirectDataReference ref;
  ref.offset = 10;
  ref.length = 100;
  std::atomic<int> reads{0};
  // The first read is held until every other caller waits for it.
  auto slow_read = [&]() -> Result<BtreeNode> {
    ++reads;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (cache.waiting() < kReaders - 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    return Leaf();
  };
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<const BtreeNode>> got(kReaders);
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&, i] {
      auto r = cache.FindOrRead(ref, slow_read);
      if (r.ok()) got[i] = *r;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(reads.load(), 1);
  EXPECT_EQ(cache.reads(), 1u);
  for (int i = 0; i < kReaders; ++i) {
    ASSERT_NE(got[i], nullptr) << i;
    EXPECT_EQ(got[i], got[0]);  // the one decoded node
  }
}

TEST(NodeCacheSharing, FailedReadIsNotShared) {
  NodeCache cache;
  IndirectDataReference ref;
  ref.length = 100;
  auto failed = cache.FindOrRead(ref, []() -> Result<BtreeNode> {
    return UnavailableError("reading node at d/x: HTTP 503");
  });
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(failed.status().message().find("HTTP 503"), std::string_view::npos);
  // Control: the next caller reads again, succeeds, and the node is cached.
  auto ok = cache.FindOrRead(ref, [] { return Result<BtreeNode>(Leaf()); });
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(cache.reads(), 2u);
  EXPECT_NE(cache.Find(ref), nullptr);
}

}  // namespace
}  // namespace cairn::ocdbt
