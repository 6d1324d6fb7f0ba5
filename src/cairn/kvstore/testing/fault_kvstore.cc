#include "cairn/kvstore/testing/fault_kvstore.h"

namespace cairn {

FaultKvStore::FaultKvStore(std::shared_ptr<KvStore> base) : base_(std::move(base)) {}

void FaultKvStore::FailNthWrite(uint64_t n, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_ = n;
  fail_after_ = false;
  error_ = std::move(error);
}

void FaultKvStore::FailWritesFrom(uint64_t n, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_ = n;
  fail_after_ = true;
  error_ = std::move(error);
}

void FaultKvStore::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_.reset();
  fail_after_ = false;
  error_ = Status::OK();
  count_ = 0;
  failed_ = 0;
}

uint64_t FaultKvStore::writes_attempted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

uint64_t FaultKvStore::writes_failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

Status FaultKvStore::NextWrite(std::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t n = count_++;
  if (!fail_at_ || error_.ok()) return Status::OK();
  const bool fail = fail_after_ ? n >= *fail_at_ : n == *fail_at_;
  if (!fail) return Status::OK();
  ++failed_;
  return error_.Annotate("injected fault on write #" + std::to_string(n) + " (" +
                         std::string(what) + ")");
}

Result<std::optional<Buffer>> FaultKvStore::Get(std::string_view key, const ByteRange& range) {
  return base_->Get(key, range);
}

Status FaultKvStore::Put(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(NextWrite("writing " + Describe(key)));
  return base_->Put(key, value);
}

Result<bool> FaultKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(NextWrite("writing " + Describe(key)));
  return base_->PutIfAbsent(key, value);
}

Result<bool> FaultKvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                         ByteView value) {
  CAIRN_RETURN_IF_ERROR(NextWrite("writing " + Describe(key)));
  return base_->CompareAndPut(key, expected, value);
}

Status FaultKvStore::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(NextWrite("deleting " + Describe(key)));
  return base_->Delete(key);
}

Result<std::vector<KeyInfo>> FaultKvStore::List(std::string_view prefix) {
  return base_->List(prefix);
}

Status FaultKvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  CAIRN_RETURN_IF_ERROR(NextWrite("batch of " + std::to_string(mutations.size()) +
                                  " mutations to " + url()));
  return base_->ApplyBatch(std::move(mutations));
}

Result<std::vector<ChildEntry>> FaultKvStore::ListChildren(std::string_view prefix) {
  return base_->ListChildren(prefix);
}

Result<bool> FaultKvStore::CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) {
  CAIRN_RETURN_IF_ERROR(NextWrite("creating " + Describe(prefix)));
  return base_->CreatePrefixHolding(prefix, name, value);
}

Result<PrefixCommit> FaultKvStore::BeginPrefixCommit(std::string_view final_prefix,
                                                     std::string_view pending_prefix) {
  CAIRN_RETURN_IF_ERROR(NextWrite("beginning the commit of " + Describe(final_prefix)));
  return base_->BeginPrefixCommit(final_prefix, pending_prefix);
}

Status FaultKvStore::FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                                        ByteView marker) {
  if (!marker_name.empty()) {
    const std::string key = commit.pending_prefix + std::string(marker_name);
    CAIRN_RETURN_IF_ERROR(NextWrite("writing the commit marker " + Describe(key)));
    if (commit.in_place) {  // as the default in-place commit: only if absent
      CAIRN_ASSIGN_OR_RETURN(bool stored, base_->PutIfAbsent(key, marker));
      if (!stored) return AlreadyExistsError("committing " + Describe(commit.final_prefix) + ": marker exists");
    } else {
      CAIRN_RETURN_IF_ERROR(base_->Put(key, marker));
    }
  }
  CAIRN_RETURN_IF_ERROR(NextWrite("publishing " + Describe(commit.final_prefix)));
  return base_->FinishPrefixCommit(commit, "", {});
}

}  // namespace cairn
