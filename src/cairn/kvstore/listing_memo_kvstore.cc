#include "cairn/kvstore/listing_memo_kvstore.h"

namespace cairn {

Result<std::vector<ChildEntry>> ListingMemoKvStore::ListChildren(std::string_view prefix) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = children_.find(prefix);
    if (it != children_.end()) return it->second;
    ++listings_;
  }
  // Errors are not remembered: the next call asks again.
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, base_->ListChildren(prefix));
  std::lock_guard<std::mutex> lock(mu_);
  children_.insert_or_assign(std::string(prefix), entries);
  return entries;
}

uint64_t ListingMemoKvStore::listings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return listings_;
}

void ListingMemoKvStore::Forget() {
  std::lock_guard<std::mutex> lock(mu_);
  children_.clear();
}

Status ListingMemoKvStore::Put(std::string_view key, ByteView value) {
  return Forgetting(base_->Put(key, value));
}
Result<bool> ListingMemoKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  return Forgetting(base_->PutIfAbsent(key, value));
}
Result<bool> ListingMemoKvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                               ByteView value) {
  return Forgetting(base_->CompareAndPut(key, expected, value));
}
Status ListingMemoKvStore::Delete(std::string_view key) {
  return Forgetting(base_->Delete(key));
}
Status ListingMemoKvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  return Forgetting(base_->ApplyBatch(std::move(mutations)));
}
Status ListingMemoKvStore::DeletePrefix(std::string_view prefix) {
  return Forgetting(base_->DeletePrefix(prefix));
}
Result<std::unique_ptr<KvWriter>> ListingMemoKvStore::OpenWriter(std::string_view key) {
  return Forgetting(base_->OpenWriter(key));
}
Result<PrefixCommit> ListingMemoKvStore::BeginPrefixCommit(std::string_view final_prefix,
                                                           std::string_view pending_prefix) {
  return Forgetting(base_->BeginPrefixCommit(final_prefix, pending_prefix));
}
Result<bool> ListingMemoKvStore::CreatePrefixHolding(std::string_view prefix, std::string_view name,
                                                     ByteView value) {
  return Forgetting(base_->CreatePrefixHolding(prefix, name, value));
}
Status ListingMemoKvStore::FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                                              ByteView marker) {
  return Forgetting(base_->FinishPrefixCommit(commit, marker_name, marker));
}

}  // namespace cairn
