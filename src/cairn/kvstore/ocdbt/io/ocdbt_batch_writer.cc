// Implements the protocol in ocdbt_batch_writer.h.
#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace cairn::ocdbt {
namespace {

class OcdbtBatchWriter final : public KvBatchWriter {
 public:
  explicit OcdbtBatchWriter(std::shared_ptr<OcdbtKvStore> store)
      : store_(std::move(store)),
        data_(store_->base().get(), store_->options().data_prefix,
              store_->options().target_data_file_size) {}

  Status Add(std::string key, ByteView value) override {
    CAIRN_RETURN_IF_ERROR(ValidateKey(key));
    std::lock_guard<std::mutex> lock(mu_);
    CAIRN_RETURN_IF_ERROR(LoadInlineLimitLocked());
    LeafValue v;
    if (value.size() <= inline_limit_) {
      v.inline_value = std::string(AsStringView(value));
    } else {
      v.is_inline = false;
      if (!failed_.ok()) return failed_;
      auto ref = data_.Append(value);
      if (!ref.ok()) {
        // The data file's end is unknown after a failed write: nothing more
        // goes into it and this batch is never committed.
        failed_ = ref.status().Annotate("writing " + store_->Describe(key));
        return failed_;
      }
      v.ref = *ref;
    }
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
    CAIRN_RETURN_IF_ERROR(data_.Finish().Annotate("committing data files of " + store_->url()));
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
    CAIRN_ASSIGN_OR_RETURN(auto manifest, store_->ReadManifest());
    inline_limit_ = manifest ? manifest->config.max_inline_value_bytes
                             : store_->options().config.max_inline_value_bytes;
    inline_loaded_ = true;
    return Status::OK();
  }

  std::shared_ptr<OcdbtKvStore> store_;
  std::mutex mu_;
  DataFileWriter data_;
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
