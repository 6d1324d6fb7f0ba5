// ForwardingKvStore: a KvStore that passes every call to another store. A
// base for stores that change a few calls of the store below and keep the
// rest (the checkpoint manager's test points, listing memos), so that each
// states only what it changes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

class ForwardingKvStore : public KvStore {
 public:
  explicit ForwardingKvStore(std::shared_ptr<KvStore> base) : base_(std::move(base)) {}

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override {
    return base_->Get(key, range);
  }
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override { return base_->GetInto(key, dst); }
  Result<std::optional<Buffer>> GetAtMost(std::string_view key, uint64_t max_bytes) override {
    return base_->GetAtMost(key, max_bytes);
  }
  Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) override {
    return base_->GetMany(reads, fn);
  }
  Status Put(std::string_view key, ByteView value) override { return base_->Put(key, value); }
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override { return base_->PutIfAbsent(key, value); }
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected, ByteView value) override {
    return base_->CompareAndPut(key, expected, value);
  }
  Status Delete(std::string_view key) override { return base_->Delete(key); }
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override { return base_->List(prefix); }
  Status ApplyBatch(std::vector<KvMutation> mutations) override { return base_->ApplyBatch(std::move(mutations)); }
  Status DeletePrefix(std::string_view prefix) override { return base_->DeletePrefix(prefix); }
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override { return base_->OpenWriter(key); }
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override {
    return base_->ListChildren(prefix);
  }
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix, std::string_view pending_prefix) override {
    return base_->BeginPrefixCommit(final_prefix, pending_prefix);
  }
  Result<bool> CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) override {
    return base_->CreatePrefixHolding(prefix, name, value);
  }
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name, ByteView marker) override {
    return base_->FinishPrefixCommit(commit, marker_name, marker);
  }
  std::string url() const override { return base_->url(); }
  std::string DescribeStored(std::string_view key) override { return base_->DescribeStored(key); }
  // The base's answers, but no batch writer of its own: a batch goes through
  // this store's Put, so that what a subclass changes about writes holds.
  StoreCapabilities Capabilities() const override {
    StoreCapabilities c = base_->Capabilities();
    c.batch_writer = false;
    return c;
  }
  size_t io_concurrency() const override { return base_->io_concurrency(); }
  void SetReadsShared(bool shared) override { base_->SetReadsShared(shared); }

  const std::shared_ptr<KvStore>& base() const { return base_; }

 protected:
  std::shared_ptr<KvStore> base_;
};

}  // namespace cairn
