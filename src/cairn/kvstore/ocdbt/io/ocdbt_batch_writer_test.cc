// The OCDBT batch writer: values added from many threads become visible in
// one new generation at Commit, none before.
#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
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

// A memory store that says it is an object store (io_concurrency() > 0, so
// the batch writer uploads full data files early) and records every upload
// of a data file (`d/...`, one Put each through the default KvWriter):
// whether the test had already called Commit when it began, how many ran at
// once; data-file Puts can be held (they wait) or made to fail.
class UploadRecordingStore final : public MemoryKvStore {
 public:
  explicit UploadRecordingStore(size_t io_concurrency) : io_concurrency_(io_concurrency) {}
  size_t io_concurrency() const override { return io_concurrency_; }

  Status Put(std::string_view key, ByteView value) override {
    if (key.substr(0, 2) != "d/") return MemoryKvStore::Put(key, value);
    {
      std::unique_lock<std::mutex> lock(mu);
      ++started;
      if (!commit_called) ++started_before_commit;
      sizes.push_back(value.size());
      max_in_flight = std::max(max_in_flight, ++in_flight);
      cv.notify_all();
      cv.wait(lock, [&] { return !hold; });
      --in_flight;
      if (fail_next) {
        fail_next = false;
        return UnavailableError("injected failure writing " + Describe(key));
      }
    }
    return MemoryKvStore::Put(key, value);
  }

  // Waits (up to a minute: a bound for a broken build, not a timing
  // assertion) until `pred` holds; returns whether it does.
  template <typename Pred>
  bool WaitFor(Pred pred) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), pred);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    hold = false;
    cv.notify_all();
  }

  std::mutex mu;
  std::condition_variable cv;
  bool commit_called = false;  // set by the test just before Commit
  bool hold = false;
  bool fail_next = false;
  int started = 0, started_before_commit = 0, in_flight = 0, max_in_flight = 0;
  std::vector<size_t> sizes;

 private:
  size_t io_concurrency_;
};

constexpr size_t kUploadFile = 64 << 10;

// 16,000 bytes: 4 fit in kUploadFile, 5 are more.
std::string Big(int i) {
  std::string v(16000, static_cast<char>('a' + i % 26));
  const std::string n = std::to_string(i);
  return v.replace(0, n.size(), n);
}

std::shared_ptr<OcdbtKvStore> EarlyUploadDatabase(std::shared_ptr<KvStore> base,
                                                  uint64_t target = uint64_t{2} << 30) {
  OcdbtOptions options;
  options.upload_file_size = kUploadFile;
  options.target_data_file_size = target;
  return std::make_shared<OcdbtKvStore>(std::move(base), options);
}

// On an object store a data file is uploaded while values are still being
// added, before Commit (the old writer uploaded every file at Commit), and
// stays unreferenced until Commit: none of its keys is visible before.
TEST(OcdbtBatchWriter, ObjectStoreUploadsDataFilesBeforeCommit) {
  auto base = std::make_shared<UploadRecordingStore>(4);
  auto store = EarlyUploadDatabase(base);
  auto writer = NewBatchWriter(store);
  // One thread: the 4 lanes take values in turn; the first Add that finds a
  // lane holding >= kUploadFile bytes (5 values) with no upload under way
  // ends that file and starts its upload.
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(writer->Add("k/" + std::to_string(100 + i), AsBytes(Big(i))).ok());
  EXPECT_TRUE(base->WaitFor([&] { return base->started >= 1; })) << base->started;
  auto before = store->Get("k/100");
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->has_value());  // uploaded, yet not part of the database
  auto no_manifest = store->ReadManifest();
  ASSERT_TRUE(no_manifest.ok());
  EXPECT_FALSE(no_manifest->has_value());
  {
    std::lock_guard<std::mutex> lock(base->mu);
    base->commit_called = true;
  }
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_GE(base->started_before_commit, 1);
  // One early upload at a time, each of at least twice the bytes of the one
  // before (few objects): the k-th started holds >= kUploadFile << k.
  for (int k = 0; k < base->started_before_commit; ++k) EXPECT_GE(base->sizes[k], kUploadFile << k) << k;
  EXPECT_GE(base->started, 1 + 4 + 1);  // + each lane's last file, + the B+tree node's
  for (int i = 0; i < 64; ++i) {
    auto v = store->Get("k/" + std::to_string(100 + i));
    ASSERT_TRUE(v.ok() && v->has_value()) << i;
    EXPECT_EQ((*v)->ToString(), Big(i));
  }
}

// While an early upload is under way no other file is ended early: values
// gather in the open files (few, large files, as TensorStore writes), and
// those go at Commit.
TEST(OcdbtBatchWriter, OneEarlyUploadAtATime) {
  auto base = std::make_shared<UploadRecordingStore>(8);
  base->hold = true;
  auto store = EarlyUploadDatabase(base);
  auto writer = NewBatchWriter(store);
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(writer->Add("k/" + std::to_string(100 + i), AsBytes(Big(i))).ok());
  EXPECT_TRUE(base->WaitFor([&] { return base->in_flight == 1; }));
  {
    std::lock_guard<std::mutex> lock(base->mu);
    EXPECT_EQ(base->started, 1);
    ASSERT_EQ(base->sizes.size(), 1u);
    EXPECT_GE(base->sizes[0], kUploadFile);
  }
  base->Release();
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(base->started, 1 + 4 + 1);  // + the 4 lanes' open files, + the node's
  auto v = store->Get("k/163");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->ToString(), Big(63));
}

// Files reaching target_data_file_size are uploaded at once too, but at most
// max(2, min(io_concurrency, 8)) files are queued or uploading: an Add that
// fills one more waits, so the memory held stays bounded.
TEST(OcdbtBatchWriter, EarlyUploadsAreBounded) {
  auto base = std::make_shared<UploadRecordingStore>(3);
  base->hold = true;
  auto store = EarlyUploadDatabase(base, /*target=*/kUploadFile);  // 4 values a file
  auto writer = NewBatchWriter(store);
  std::atomic<bool> adds_done{false};
  std::thread adder([&] {
    for (int i = 0; i < 64; ++i) EXPECT_TRUE(writer->Add("k/" + std::to_string(100 + i), AsBytes(Big(i))).ok());
    adds_done = true;
  });
  const bool reached = base->WaitFor([&] { return base->in_flight == 3; });
  EXPECT_TRUE(reached);
  if (reached) {
    // 12 files fill up, but with uploads held only 3 can be pending: the
    // adder waits (it cannot finish until an upload completes).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(adds_done.load());
    std::lock_guard<std::mutex> lock(base->mu);
    EXPECT_EQ(base->max_in_flight, 3);
  }
  base->Release();
  adder.join();
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_LE(base->max_in_flight, 3 + 4);  // + the lanes' last files, at Commit
  for (size_t i = 0; i < base->sizes.size(); ++i) EXPECT_LE(base->sizes[i], kUploadFile) << i;
  auto v = store->Get("k/163");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->ToString(), Big(63));
}

// A failed early upload fails the Commit, which then commits nothing; the
// error names the data file. An abandoned writer waits for its uploads.
TEST(OcdbtBatchWriter, FailedEarlyUploadFailsCommit) {
  auto base = std::make_shared<UploadRecordingStore>(4);
  base->fail_next = true;
  auto store = EarlyUploadDatabase(base);
  auto writer = NewBatchWriter(store);
  for (int i = 0; i < 64; ++i) (void)writer->Add("k/" + std::to_string(100 + i), AsBytes(Big(i)));
  Status st = writer->Commit();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("OCDBT data file"), std::string_view::npos) << st.ToString();
  EXPECT_NE(st.message().find("injected failure"), std::string_view::npos) << st.ToString();
  auto manifest = store->ReadManifest();
  ASSERT_TRUE(manifest.ok());
  EXPECT_FALSE(manifest->has_value());

  auto abandoned = NewBatchWriter(store);
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(abandoned->Add("a/" + std::to_string(i), AsBytes(Big(i))).ok());
  abandoned.reset();  // joins its upload threads
  {
    std::lock_guard<std::mutex> lock(base->mu);
    EXPECT_EQ(base->in_flight, 0);
  }
  auto still = store->ReadManifest();
  ASSERT_TRUE(still.ok());
  EXPECT_FALSE(still->has_value());
}

// Control: on a local store (io_concurrency() == 0) nothing changes: files
// are cut at target_data_file_size and written at Commit.
TEST(OcdbtBatchWriter, LocalStoreUploadsNothingBeforeCommit) {
  auto base = std::make_shared<UploadRecordingStore>(0);
  auto store = EarlyUploadDatabase(base);
  auto writer = NewBatchWriter(store);
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(writer->Add("k/" + std::to_string(100 + i), AsBytes(Big(i))).ok());
  {
    std::lock_guard<std::mutex> lock(base->mu);
    base->commit_called = true;
  }
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(base->started_before_commit, 0);
  EXPECT_EQ(base->started, 4 + 1);  // one file per lane, + the node file
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
