// The OCDBT batch writer makes its data files durable all at once at Commit:
// on an object store each is an upload, and uploading them one after the
// other left the HTTP client's other connections idle. The store here holds
// the commit of each of the two data files until both are inside at once
// (or 10 s pass, and then the count shows they were not), so the test needs
// no timing. Control: everything still lands in one generation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"

namespace cairn::ocdbt {
namespace {

class GatedCommitStore : public MemoryKvStore {
 public:
  std::atomic<bool> hold_first_append{false};
  std::atomic<int> blocked{0};
  std::atomic<int> committing{0}, max_committing{0};

  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override {
    CAIRN_ASSIGN_OR_RETURN(auto inner, MemoryKvStore::OpenWriter(key));
    const int index = opened_++;
    return std::unique_ptr<KvWriter>(std::make_unique<Writer>(this, std::move(inner), index));
  }

 private:
  class Writer final : public KvWriter {
   public:
    Writer(GatedCommitStore* store, std::unique_ptr<KvWriter> inner, int index)
        : store_(store), inner_(std::move(inner)), index_(index) {}
    Status Append(ByteView bytes) override {
      // The first data file's first append waits, so a second Add meanwhile
      // goes to a second data file.
      if (index_ == 0 && store_->hold_first_append.load()) {
        ++store_->blocked;
        while (store_->hold_first_append.load()) std::this_thread::yield();
      }
      return inner_->Append(bytes);
    }
    Status Commit() override {
      if (index_ < 2) {  // the two data files of the values
        int inside = ++store_->committing;
        int seen = store_->max_committing.load();
        while (inside > seen && !store_->max_committing.compare_exchange_weak(seen, inside)) {
        }
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (store_->max_committing.load() < 2 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
      }
      return inner_->Commit();
    }
    uint64_t size() const override { return inner_->size(); }

   private:
    GatedCommitStore* store_;
    std::unique_ptr<KvWriter> inner_;
    const int index_;
  };
  std::atomic<int> opened_{0};
};

TEST(OcdbtBatchWriterCommit, DataFilesAreMadeDurableConcurrently) {
  auto base = std::make_shared<GatedCommitStore>();
  auto store = std::make_shared<OcdbtKvStore>(base, OcdbtOptions{});
  auto writer = NewBatchWriter(store);
  const std::string a(5000, 'a'), b(6000, 'b');  // both out of line
  base->hold_first_append = true;
  std::thread first([&] { EXPECT_TRUE(writer->Add("a", AsBytes(a)).ok()); });
  while (base->blocked.load() == 0) std::this_thread::yield();
  ASSERT_TRUE(writer->Add("b", AsBytes(b)).ok());  // into a second data file
  base->hold_first_append = false;
  first.join();
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(base->max_committing.load(), 2);  // both files were committing at once
  auto manifest = store->ReadManifest();
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  EXPECT_EQ((*manifest)->latest_generation(), 1u);
  auto va = store->Get("a");
  auto vb = store->Get("b");
  ASSERT_TRUE(va.ok() && va->has_value() && vb.ok() && vb->has_value());
  EXPECT_EQ((*va)->ToString(), a);
  EXPECT_EQ((*vb)->ToString(), b);
}

}  // namespace
}  // namespace cairn::ocdbt
