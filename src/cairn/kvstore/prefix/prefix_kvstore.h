// PrefixKvStore: a view of another KvStore rooted at a key prefix.
//
// Key `k` of the view is key `prefix + k` of the base store; List strips the
// prefix again. Used for `memory://name/path/` and for adapter paths such as
// `|ocdbt:path/`. Batches are forwarded as one batch, so a base store that
// applies batches atomically (OCDBT) still does.
//
// Thread safety: as thread-safe as the base store (all drivers are).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/mapped_read.h"

namespace cairn {

class PrefixKvStore : public KvStore, public MappedReadStore {
 public:
  // REQUIRES: base != nullptr. `prefix` is prepended verbatim (normally it
  // ends with '/'). `url` names the view in errors; empty = base url + prefix.
  PrefixKvStore(std::shared_ptr<KvStore> base, std::string prefix, std::string url = "");

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override;
  Result<std::optional<Buffer>> GetAtMost(std::string_view key, uint64_t max_bytes) override;
  // Forwards to the base store's GetMany (so its batching applies).
  Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) override;
  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override;
  Status ApplyBatch(std::vector<KvMutation> mutations) override;
  Status DeletePrefix(std::string_view prefix) override;
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override;
  // ListChildren and prefix commits forward to the base with the prefix
  // added (and strip it from the returned PrefixCommit).
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override;
  Result<bool> CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) override;
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix,
                                         std::string_view pending_prefix) override;
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                            ByteView marker) override;
  std::string url() const override { return url_; }
  // The base store's answers; its batch writer with the prefix added.
  StoreCapabilities Capabilities() const override { return base_->Capabilities(); }
  std::unique_ptr<KvBatchWriter> OpenBatchWriter() override;
  size_t io_concurrency() const override { return base_->io_concurrency(); }
  void SetReadsShared(bool shared) override { base_->SetReadsShared(shared); }
  // Forwards to the base store's capability (nullptr without one).
  std::string DescribeStored(std::string_view key) override;
  Result<std::shared_ptr<MappedBytes>> MapRange(std::string_view key, uint64_t offset,
                                                uint64_t length) override;

  const std::shared_ptr<KvStore>& base() const { return base_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string Full(std::string_view key) const;

  std::shared_ptr<KvStore> base_;
  std::string prefix_;
  std::string url_;
};

// Returns `base` itself when `prefix` is empty, else a PrefixKvStore.
std::shared_ptr<KvStore> MakePrefixKvStore(std::shared_ptr<KvStore> base, std::string prefix,
                                           std::string url = "");

}  // namespace cairn
