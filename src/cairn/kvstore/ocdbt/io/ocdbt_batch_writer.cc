// Implements the protocol in ocdbt_batch_writer.h.
#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"
#include "cairn/kvstore/ocdbt/io/data_file_writer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn::ocdbt {
namespace {

// Full data files committed (on an object store: uploaded) in the background
// while the batch goes on (step 1 of the protocol in ocdbt_batch_writer.h).
// At most `max_pending` files are queued or uploading at once: Submit waits
// for room, so the memory held by finished files stays bounded. Each file is
// committed by one of at most max_pending threads, started as needed.
class EarlyUploads {
 public:
  explicit EarlyUploads(size_t max_pending) : max_pending_(std::max<size_t>(max_pending, 1)) {}
  ~EarlyUploads() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      room_.wait(lock, [&] { return pending_ == 0; });
      stop_ = true;
    }
    work_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Queues `file` for its Commit; `what` prefixes its error. Fails at once
  // with the first error of an earlier file (nothing more is uploaded then).
  Status Submit(std::unique_ptr<KvWriter> file, std::string what) {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [&] { return pending_ < max_pending_; });
    if (!failed_.ok()) return failed_;
    queue_.push_back({std::move(file), std::move(what)});
    ++pending_;
    if (idle_ < queue_.size() && threads_.size() < max_pending_) {
      threads_.emplace_back([this] { Loop(); });
    }
    work_.notify_one();
    return Status::OK();
  }

  // Whether no file is queued or uploading.
  bool Idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_ == 0;
  }

  // Waits until every submitted file is committed; the first error.
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [&] { return pending_ == 0; });
    return failed_;
  }

 private:
  struct Job {
    std::unique_ptr<KvWriter> file;
    std::string what;
  };

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      work_.wait(lock, [&] { return !queue_.empty() || stop_; });
      --idle_;
      if (queue_.empty()) return;  // stopping
      Job job = std::move(queue_.front());
      queue_.pop_front();
      const bool skip = !failed_.ok();  // the batch is lost: upload no more
      lock.unlock();
      Status st = skip ? Status::OK() : job.file->Commit().Annotate(job.what);
      job.file.reset();  // free the file's bytes before making room
      lock.lock();
      if (!st.ok() && failed_.ok()) failed_ = std::move(st);
      --pending_;
      room_.notify_all();
    }
  }

  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable room_;  // pending_ fell
  std::condition_variable work_;  // a job was queued, or stop_
  std::deque<Job> queue_;
  std::vector<std::thread> threads_;
  size_t pending_ = 0;  // queued or being committed
  size_t idle_ = 0;     // threads waiting for a job
  bool stop_ = false;
  Status failed_;
};

// The size from which an open data file is cut and uploaded early while no
// other is uploading, or 0 when files are not uploaded early (a local base
// store, or the option is 0).
uint64_t EarlyUploadFileSize(const KvStore& base, const OcdbtOptions& options) {
  if (base.io_concurrency() == 0) return 0;
  uint64_t size = options.upload_file_size;
  if (const char* env = std::getenv("CAIRN_OCDBT_UPLOAD_FILE_SIZE"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end != nullptr && *end == '\0') size = v;
  }
  if (size == 0) return 0;
  const uint64_t target = options.target_data_file_size;
  return target == 0 ? size : std::min(size, target);
}

class OcdbtBatchWriter final : public KvBatchWriter {
 public:
  explicit OcdbtBatchWriter(std::shared_ptr<OcdbtKvStore> store) : store_(std::move(store)) {
    KvStore* base = store_->base().get();
    const OcdbtOptions& options = store_->options();
    early_cut_ = EarlyUploadFileSize(*base, options);
    if (early_cut_ != 0) {
      uploads_ = std::make_unique<EarlyUploads>(std::clamp<size_t>(base->io_concurrency(), 2, 8));
    }
    for (auto& lane : lanes_) {
      lane = std::make_unique<Lane>(base, options.data_prefix, options.target_data_file_size,
                                    options.value_alignment);
      if (uploads_) {
        lane->data.set_full_file_handler([this, base](std::unique_ptr<KvWriter> file, const DataFileId& id) {
          return uploads_->Submit(std::move(file),
                                  "writing OCDBT data file " + base->Describe(id.relative_path));
        });
      }
    }
  }

  Status Add(std::string key, ByteView value) override {
    CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(store_->url()));
    uint64_t inline_limit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      CAIRN_RETURN_IF_ERROR(LoadInlineLimitLocked());
      if (!failed_.ok()) return failed_;
      inline_limit = inline_limit_;
    }
    LeafValue v;
    if (value.size() <= inline_limit) {
      v.inline_value = std::string(AsStringView(value));
    } else {
      v.is_inline = false;
      Lane& lane = TakeLane();
      std::unique_lock<std::mutex> held(lane.mu, std::adopt_lock);
      const Status cut = CutEarly(lane);
      auto ref = cut.ok() ? lane.data.Append(value) : Result<IndirectDataReference>(cut);
      held.unlock();
      if (!ref.ok()) {
        // The data file's end is unknown after a failed write: nothing more
        // goes into it and this batch is never committed.
        std::lock_guard<std::mutex> lock(mu_);
        if (failed_.ok()) failed_ = ref.status().Annotate("writing " + store_->Describe(key));
        return failed_;
      }
      v.ref = *ref;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_;
    entries_.push_back({std::move(key), std::move(v)});
    return Status::OK();
  }

  Status Delete(std::string key) override {
    CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(store_->url()));
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back({std::move(key), std::nullopt});
    return Status::OK();
  }

  Status Commit() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_.Annotate("not committing " + store_->url() + " after a failed write");
    CAIRN_RETURN_IF_ERROR(FinishLanes());
    if (uploads_) {
      CAIRN_RETURN_IF_ERROR(uploads_->Wait().Annotate("committing data files of " + store_->url()));
    }
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const BtreeMutation& a, const BtreeMutation& b) { return a.key < b.key; });
    std::vector<BtreeMutation> unique;
    unique.reserve(entries_.size());
    for (auto& e : entries_) {
      if (!unique.empty() && unique.back().key == e.key) {
        unique.back() = std::move(e);
      } else {
        unique.push_back(std::move(e));
      }
    }
    entries_.clear();
    return store_->CommitEntries(std::move(unique));
  }

 private:
  // The inline limit of the database (an existing one keeps its config).
  Status LoadInlineLimitLocked() {
    if (inline_loaded_) return Status::OK();
    CAIRN_ASSIGN_OR_RETURN(Config config, store_->ConfigForWrites());
    inline_limit_ = config.max_inline_value_bytes;
    inline_loaded_ = true;
    return Status::OK();
  }

  // Makes every lane's open data file durable, all at once: on an object
  // store each is an upload of its own (the HTTP client runs them
  // concurrently), on files an fdatasync each.
  Status FinishLanes() {
    Status results[kLanes];
    std::vector<std::thread> threads;
    for (size_t i = 1; i < kLanes; ++i) {
      if (lanes_[i]->data.files().empty()) continue;  // nothing written: nothing to finish
      threads.emplace_back([this, i, &results] {
        std::lock_guard<std::mutex> held(lanes_[i]->mu);
        results[i] = lanes_[i]->data.Finish();
      });
    }
    {
      std::lock_guard<std::mutex> held(lanes_[0]->mu);
      results[0] = lanes_[0]->data.Finish();
    }
    for (auto& t : threads) t.join();
    for (const Status& s : results) {
      CAIRN_RETURN_IF_ERROR(s.Annotate("committing data files of " + store_->url()));
    }
    return Status::OK();
  }

  // An open data file and the mutex its appends hold.
  struct Lane {
    Lane(KvStore* base, std::string prefix, uint64_t target, uint64_t alignment)
        : data(base, std::move(prefix), target, alignment) {}
    std::mutex mu;
    DataFileWriter data;
  };

  // Step 1's early cut (object stores): while no data file is uploading,
  // a lane's open file of at least early_cut_ << (files cut so far) bytes
  // is ended and its upload started, so the uploads run while later values
  // are still copied in, in few files (16, then at least 32, 64, ... MiB:
  // the emulators and real buckets pay per object; TensorStore likewise
  // sends what gathered whenever its previous data file is written). Called
  // with the lane held.
  Status CutEarly(Lane& lane) {
    if (!uploads_) return Status::OK();
    const size_t cuts = std::min<size_t>(early_cuts_.load(std::memory_order_relaxed), 20);
    if (lane.data.open_size() < (early_cut_ << cuts) || !uploads_->Idle()) return Status::OK();
    early_cuts_.fetch_add(1, std::memory_order_relaxed);
    return lane.data.RollOver();
  }

  // Locks and returns an idle lane, else waits for the next one in turn.
  Lane& TakeLane() {
    const size_t start = next_lane_.fetch_add(1, std::memory_order_relaxed);
    for (size_t i = 0; i < kLanes; ++i) {
      Lane& lane = *lanes_[(start + i) % kLanes];
      if (lane.mu.try_lock()) return lane;
    }
    Lane& lane = *lanes_[start % kLanes];
    lane.mu.lock();
    return lane;
  }

  // Up to this many data files are written at once, each by one thread: a
  // thread blocked on the device does not hold up the others' appends.
  static constexpr size_t kLanes = 4;
  std::atomic<size_t> early_cuts_{0};

  std::shared_ptr<OcdbtKvStore> store_;
  std::mutex mu_;  // entries_, the inline limit, failed_
  std::unique_ptr<Lane> lanes_[kLanes];
  std::atomic<size_t> next_lane_{0};
  std::vector<BtreeMutation> entries_;
  uint64_t inline_limit_ = 0;
  uint64_t early_cut_ = 0;  // 0: no early uploads (local stores)
  bool inline_loaded_ = false;
  Status failed_;  // the first failed data write; then Add and Commit fail
  // Full data files being uploaded while Adds go on (object stores only).
  // Declared last: destroyed first, waiting for its uploads.
  std::unique_ptr<EarlyUploads> uploads_;
};

}  // namespace

std::unique_ptr<KvBatchWriter> NewOcdbtBatchWriter(std::shared_ptr<OcdbtKvStore> store) {
  return std::make_unique<OcdbtBatchWriter>(std::move(store));
}

std::unique_ptr<KvBatchWriter> OcdbtKvStore::OpenBatchWriter() {
  std::shared_ptr<OcdbtKvStore> self = weak_from_this().lock();
  if (self == nullptr) return nullptr;
  return NewOcdbtBatchWriter(std::move(self));
}

}  // namespace cairn::ocdbt
