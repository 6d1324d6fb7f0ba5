// The OCDBT batch writer: values added from many threads become visible in
// one new generation at Commit, none before.
#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "cairn/kvstore/memory/memory_kvstore.h"

namespace cairn::ocdbt {
namespace {

std::string Value(int i) { return std::string(i % 2 == 0 ? 10 : 5000, static_cast<char>('a' + i % 26)) + std::to_string(i); }

TEST(OcdbtBatchWriter, ConcurrentAddsCommitAsOneGeneration) {
  auto base = std::make_shared<MemoryKvStore>();
  auto store = std::make_shared<OcdbtKvStore>(base, OcdbtOptions{});
  ASSERT_TRUE(store->Put("old", AsBytes("x")).ok());  // generation 1
  auto writer = NewBatchWriter(store);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 64; i += 4) {
        EXPECT_TRUE(writer->Add("k/" + std::to_string(1000 + i), AsBytes(Value(i))).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto before = store->Get("k/1001");
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->has_value());  // nothing visible before Commit
  ASSERT_TRUE(writer->Commit().ok());
  auto manifest = store->ReadManifest();
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  EXPECT_EQ((*manifest)->latest_generation(), 2u);
  for (int i = 0; i < 64; ++i) {
    auto v = store->Get("k/" + std::to_string(1000 + i));
    ASSERT_TRUE(v.ok() && v->has_value()) << i;
    EXPECT_EQ((*v)->ToString(), Value(i));
  }
  auto old = store->Get("old");
  ASSERT_TRUE(old.ok() && old->has_value());
  auto bad = writer->Add("/abs", AsBytes("x"));
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

// A memory store whose first writer (the first data file) blocks in Append
// while `hold` is set, standing for a device write that takes long.
class SlowWriteStore final : public MemoryKvStore {
 public:
  std::atomic<bool> hold{false};
  std::atomic<int> blocked{0};

  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override {
    CAIRN_ASSIGN_OR_RETURN(auto inner, MemoryKvStore::OpenWriter(key));
    const bool slow = opened_++ == 0;
    return std::unique_ptr<KvWriter>(std::make_unique<Writer>(this, std::move(inner), slow));
  }

 private:
  class Writer final : public KvWriter {
   public:
    Writer(SlowWriteStore* store, std::unique_ptr<KvWriter> inner, bool slow)
        : store_(store), inner_(std::move(inner)), slow_(slow) {}
    Status Append(ByteView bytes) override {
      if (slow_ && store_->hold.load()) {
        ++store_->blocked;
        while (store_->hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        --store_->blocked;
      }
      return inner_->Append(bytes);
    }
    Status Commit() override { return inner_->Commit(); }
    uint64_t size() const override { return inner_->size(); }

   private:
    SlowWriteStore* store_;
    std::unique_ptr<KvWriter> inner_;
    bool slow_;
  };
  std::atomic<int> opened_{0};
};

// A thread stuck writing one value does not hold up other threads' Adds:
// they go to other data files (the encoders keep working while the device
// writes); everything still commits as one generation.
TEST(OcdbtBatchWriter, AddsGoOnWhileAnotherAddIsBlockedWriting) {
  auto base = std::make_shared<SlowWriteStore>();
  auto store = std::make_shared<OcdbtKvStore>(base, OcdbtOptions{});
  auto writer = NewBatchWriter(store);
  const std::string big(5000, 'b');  // out of line
  base->hold = true;
  std::atomic<bool> stuck_done{false};
  std::thread stuck([&] {
    EXPECT_TRUE(writer->Add("stuck", AsBytes(big)).ok());
    stuck_done = true;
  });
  while (base->blocked.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto others = std::async(std::launch::async, [&] {
    for (int i = 0; i < 3; ++i) {
      Status s = writer->Add("other/" + std::to_string(i), AsBytes(std::string(5000, 'a' + i)));
      if (!s.ok()) return s;
    }
    return Status::OK();
  });
  // The other Adds return while the first is still stuck (control: it is).
  EXPECT_EQ(others.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_FALSE(stuck_done.load());
  base->hold = false;
  stuck.join();
  ASSERT_TRUE(others.get().ok());
  ASSERT_TRUE(writer->Commit().ok());
  auto manifest = store->ReadManifest();
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  EXPECT_EQ((*manifest)->latest_generation(), 1u);
  for (int i = 0; i < 3; ++i) {
    auto v = store->Get("other/" + std::to_string(i));
    ASSERT_TRUE(v.ok() && v->has_value()) << i;
    EXPECT_EQ((*v)->ToString(), std::string(5000, 'a' + i));
  }
  auto v = store->Get("stuck");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->ToString(), big);
}

TEST(OcdbtBatchWriter, DefaultWriterPutsEachValue) {
  auto base = std::make_shared<MemoryKvStore>();
  auto writer = NewBatchWriter(base);
  ASSERT_TRUE(writer->Add("a", AsBytes("1")).ok());
  auto v = base->Get("a");
  ASSERT_TRUE(v.ok() && v->has_value());  // visible at once on a plain store
  EXPECT_TRUE(writer->Commit().ok());
}

}  // namespace
}  // namespace cairn::ocdbt
