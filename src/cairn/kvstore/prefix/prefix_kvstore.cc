#include "cairn/kvstore/prefix/prefix_kvstore.h"

#include "cairn/kvstore/batch_writer.h"

namespace cairn {

PrefixKvStore::PrefixKvStore(std::shared_ptr<KvStore> base, std::string prefix, std::string url)
    : base_(std::move(base)), prefix_(std::move(prefix)), url_(std::move(url)) {
  if (url_.empty()) url_ = base_->url() + prefix_;
}

std::string PrefixKvStore::Full(std::string_view key) const {
  std::string full = prefix_;
  full += key;
  return full;
}

// Keys are validated against the view (so "../x" cannot escape the prefix)
// before the base store sees the prefixed key.
Result<std::optional<Buffer>> PrefixKvStore::Get(std::string_view key, const ByteRange& range) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("reading from " + url_));
  return base_->Get(Full(key), range);
}

Status PrefixKvStore::GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) {
  std::vector<KeyRead> full;
  full.reserve(reads.size());
  for (const KeyRead& r : reads) {
    CAIRN_RETURN_IF_ERROR(ValidateKey(r.key).Annotate("reading from " + url_));
    full.push_back({Full(r.key), r.range, r.max_bytes});
  }
  return base_->GetMany(full, fn);
}

std::string PrefixKvStore::DescribeStored(std::string_view key) {
  if (!ValidateKey(key).ok()) return Describe(key);
  return base_->DescribeStored(Full(key));
}

Result<std::shared_ptr<MappedBytes>> PrefixKvStore::MapRange(std::string_view key, uint64_t offset,
                                                             uint64_t length) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  MappedReadStore* base = AsMappedReadStore(base_.get());
  if (base == nullptr) return std::shared_ptr<MappedBytes>();
  return base->MapRange(Full(key), offset, length);
}

Result<bool> PrefixKvStore::GetInto(std::string_view key, MutableByteView dst) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("reading from " + url_));
  return base_->GetInto(Full(key), dst);
}

Result<std::optional<Buffer>> PrefixKvStore::GetAtMost(std::string_view key, uint64_t max_bytes) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("reading from " + url_));
  return base_->GetAtMost(Full(key), max_bytes);
}

Status PrefixKvStore::Put(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("writing to " + url_));
  return base_->Put(Full(key), value);
}

std::unique_ptr<KvBatchWriter> PrefixKvStore::OpenBatchWriter() {
  return NewPrefixedBatchWriter(base_->OpenBatchWriter(), prefix_);
}

Result<std::unique_ptr<KvWriter>> PrefixKvStore::OpenWriter(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("writing to " + url_));
  return base_->OpenWriter(Full(key));
}

Result<bool> PrefixKvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                          ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("writing to " + url_));
  return base_->CompareAndPut(Full(key), expected, value);
}

Result<bool> PrefixKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("writing to " + url_));
  return base_->PutIfAbsent(Full(key), value);
}

Status PrefixKvStore::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("deleting from " + url_));
  return base_->Delete(Full(key));
}

Result<std::vector<KeyInfo>> PrefixKvStore::List(std::string_view prefix) {
  CAIRN_ASSIGN_OR_RETURN(auto keys, base_->List(Full(prefix)));
  for (KeyInfo& k : keys) k.key.erase(0, prefix_.size());
  return keys;
}

Status PrefixKvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  for (KvMutation& m : mutations) {
    CAIRN_RETURN_IF_ERROR(ValidateKey(m.key).Annotate("batch write to " + url_));
    m.key.insert(0, prefix_);
  }
  return base_->ApplyBatch(std::move(mutations));
}

Status PrefixKvStore::DeletePrefix(std::string_view prefix) {
  return base_->DeletePrefix(Full(prefix));
}

Result<std::vector<ChildEntry>> PrefixKvStore::ListChildren(std::string_view prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "ListChildren prefix of " + url_, /*allow_empty=*/true));
  return base_->ListChildren(Full(prefix));
}

Result<bool> PrefixKvStore::CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "prefix in " + url_, false));
  return base_->CreatePrefixHolding(Full(prefix), name, value);
}

Result<PrefixCommit> PrefixKvStore::BeginPrefixCommit(std::string_view final_prefix,
                                                      std::string_view pending_prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(final_prefix, "final prefix in " + url_, false));
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(pending_prefix, "pending prefix in " + url_, false));
  CAIRN_ASSIGN_OR_RETURN(PrefixCommit c, base_->BeginPrefixCommit(Full(final_prefix), Full(pending_prefix)));
  c.final_prefix.erase(0, prefix_.size());
  c.pending_prefix.erase(0, prefix_.size());
  return c;
}

Status PrefixKvStore::FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                                         ByteView marker) {
  PrefixCommit full = commit;
  full.final_prefix.insert(0, prefix_);
  full.pending_prefix.insert(0, prefix_);
  return base_->FinishPrefixCommit(full, marker_name, marker);
}

std::shared_ptr<KvStore> MakePrefixKvStore(std::shared_ptr<KvStore> base, std::string prefix,
                                           std::string url) {
  if (prefix.empty()) return base;
  return std::make_shared<PrefixKvStore>(std::move(base), std::move(prefix), std::move(url));
}

}  // namespace cairn
