// ListingMemoKvStore: a view of a store that remembers each ListChildren
// answer, for code that walks a few directories and looks at some of them
// more than once (resolving a checkpoint path to its item looks at the root,
// its steps and the step's items several times). On an object store every
// listing is a request; through the memo each prefix is listed once.
//
// Answers can go stale: use a memo for one walk, then drop it. Writes pass
// through and forget every remembered answer (a value written through
// OpenWriter appears at its Commit, which the memo does not see). Thread safety: all methods may
// be called concurrently.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/forwarding_kvstore.h"

namespace cairn {

class ListingMemoKvStore final : public ForwardingKvStore {
 public:
  explicit ListingMemoKvStore(std::shared_ptr<KvStore> base) : ForwardingKvStore(std::move(base)) {}

  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override;

  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected, ByteView value) override;
  Status Delete(std::string_view key) override;
  Status ApplyBatch(std::vector<KvMutation> mutations) override;
  Status DeletePrefix(std::string_view prefix) override;
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override;
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix, std::string_view pending_prefix) override;
  Result<bool> CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) override;
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name, ByteView marker) override;

  uint64_t listings() const;  // ListChildren calls that reached the base store

 private:
  void Forget();
  // A write's result, after forgetting every remembered answer (the write
  // may have changed any of them).
  template <typename T>
  T Forgetting(T result) {
    Forget();
    return result;
  }

  mutable std::mutex mu_;
  std::map<std::string, std::vector<ChildEntry>, std::less<>> children_;
  uint64_t listings_ = 0;
};

}  // namespace cairn
