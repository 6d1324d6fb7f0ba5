// Implements the protocol in ocdbt_batch_writer.h.
#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"
#include "cairn/kvstore/ocdbt/io/data_file_writer.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn::ocdbt {
namespace {

class OcdbtBatchWriter final : public KvBatchWriter {
 public:
  explicit OcdbtBatchWriter(std::shared_ptr<OcdbtKvStore> store) : store_(std::move(store)) {
    for (auto& lane : lanes_) {
      lane = std::make_unique<Lane>(store_->base().get(), store_->options().data_prefix,
                                    store_->options().target_data_file_size,
                                    store_->options().value_alignment);
    }
  }

  Status Add(std::string key, ByteView value) override {
    CAIRN_RETURN_IF_ERROR(ValidateKey(key));
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
      auto ref = lane.data.Append(value);
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
    CAIRN_RETURN_IF_ERROR(ValidateKey(key));
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back({std::move(key), std::nullopt});
    return Status::OK();
  }

  Status Commit() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_.Annotate("not committing " + store_->url() + " after a failed write");
    CAIRN_RETURN_IF_ERROR(FinishLanes());
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

  std::shared_ptr<OcdbtKvStore> store_;
  std::mutex mu_;  // entries_, the inline limit, failed_
  std::unique_ptr<Lane> lanes_[kLanes];
  std::atomic<size_t> next_lane_{0};
  std::vector<BtreeMutation> entries_;
  uint64_t inline_limit_ = 0;
  bool inline_loaded_ = false;
  Status failed_;  // the first failed data write; then Add and Commit fail
};

}  // namespace

std::unique_ptr<KvBatchWriter> NewOcdbtBatchWriter(std::shared_ptr<OcdbtKvStore> store) {
  return std::make_unique<OcdbtBatchWriter>(std::move(store));
}

}  // namespace cairn::ocdbt
