#include "cairn/kvstore/memory/memory_kvstore.h"

#include <cstring>

namespace cairn {

MemoryKvStore::MemoryKvStore(std::string url) : url_(std::move(url)) {}

std::shared_ptr<MemoryKvStore> MemoryKvStore::Default() {
  static auto* instance = new std::shared_ptr<MemoryKvStore>(
      std::make_shared<MemoryKvStore>("memory://"));
  return *instance;
}

Result<std::optional<Buffer>> MemoryKvStore::Get(std::string_view key, const ByteRange& range) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("reading from " + url_));
  Value value;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::optional<Buffer>();
    value = it->second;
  }
  auto resolved = ResolveByteRange(range, value->size());
  if (!resolved.ok()) return resolved.status().Annotate("reading " + Describe(key));
  auto [begin, end] = *resolved;
  return std::optional<Buffer>(Buffer::CopyOf(value->view().subspan(begin, end - begin)));
}

Status MemoryKvStore::Put(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("writing to " + url_));
  auto stored = std::make_shared<const Buffer>(Buffer::CopyOf(value));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    map_.emplace(std::string(key), std::move(stored));
  } else {
    it->second = std::move(stored);
  }
  return Status::OK();
}

Result<bool> MemoryKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("writing to " + url_));
  auto stored = std::make_shared<const Buffer>(Buffer::CopyOf(value));
  std::lock_guard<std::mutex> lock(mu_);
  if (map_.find(key) != map_.end()) return false;
  map_.emplace(std::string(key), std::move(stored));
  return true;
}

Result<bool> MemoryKvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                          ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("writing to " + url_));
  auto stored = std::make_shared<const Buffer>(Buffer::CopyOf(value));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (expected) return false;
    map_.emplace(std::string(key), std::move(stored));
    return true;
  }
  if (!expected || it->second->size() != expected->size() ||
      (!expected->empty() &&
       std::memcmp(it->second->data(), expected->data(), expected->size()) != 0)) {
    return false;
  }
  it->second = std::move(stored);
  return true;
}

Status MemoryKvStore::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate("deleting from " + url_));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) map_.erase(it);
  return Status::OK();
}

Result<std::vector<KeyInfo>> MemoryKvStore::List(std::string_view prefix) {
  std::vector<KeyInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = map_.lower_bound(prefix); it != map_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    out.push_back(KeyInfo{it->first, it->second->size()});
  }
  return out;
}

Status MemoryKvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  std::vector<Value> values(mutations.size());
  for (size_t i = 0; i < mutations.size(); ++i) {
    CAIRN_RETURN_IF_ERROR(ValidateKey(mutations[i].key).Annotate("batch write to " + url_));
    if (mutations[i].value) {
      values[i] = std::make_shared<const Buffer>(std::move(*mutations[i].value));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < mutations.size(); ++i) {
    if (values[i]) {
      map_.insert_or_assign(std::move(mutations[i].key), std::move(values[i]));
    } else {
      auto it = map_.find(mutations[i].key);
      if (it != map_.end()) map_.erase(it);
    }
  }
  return Status::OK();
}

Status MemoryKvStore::DeletePrefix(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.lower_bound(prefix);
  while (it != map_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    it = map_.erase(it);
  }
  for (auto p = pending_.lower_bound(prefix); p != pending_.end() && p->compare(0, prefix.size(), prefix) == 0;) {
    p = pending_.erase(p);
  }
  return Status::OK();
}

// Prefix commit (kvstore.h), memory driver:
//   1. Begin: AlreadyExists when `final` holds keys; records `pending`.
//   2. The caller writes keys under `pending`.
//   3. Finish, under one lock: NotFound unless `pending` is still recorded;
//      AlreadyExists when `final` holds keys; stores the marker under
//      `pending`, then moves every key of `pending` to `final`.
Result<PrefixCommit> MemoryKvStore::BeginPrefixCommit(std::string_view final_prefix,
                                                      std::string_view pending_prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(final_prefix, "final prefix in " + url_, false));
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(pending_prefix, "pending prefix in " + url_, false));
  if (final_prefix.starts_with(pending_prefix) || pending_prefix.starts_with(final_prefix)) {
    return InvalidArgumentError("committing " + Describe(final_prefix) + ": pending prefix " +
                                std::string(pending_prefix) + " overlaps it");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.lower_bound(final_prefix);
  if (it != map_.end() && it->first.starts_with(final_prefix)) {
    return AlreadyExistsError("committing " + Describe(final_prefix) + ": it already holds keys");
  }
  pending_.emplace(pending_prefix);
  return PrefixCommit{std::string(final_prefix), std::string(pending_prefix), /*in_place=*/false};
}

Status MemoryKvStore::FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                                         ByteView marker) {
  const std::string& from = commit.pending_prefix;
  const std::string& to = commit.final_prefix;
  std::string marker_key = from + std::string(marker_name);
  if (!marker_name.empty()) CAIRN_RETURN_IF_ERROR(ValidateKey(marker_key).Annotate("commit marker in " + url_));
  auto marker_value = std::make_shared<const Buffer>(Buffer::CopyOf(marker));
  std::lock_guard<std::mutex> lock(mu_);
  auto p = pending_.find(from);
  if (p == pending_.end()) {
    return NotFoundError("committing " + Describe(to) + ": pending prefix " + from +
                         " is gone (a newer commit of the same prefix removed it)");
  }
  auto existing = map_.lower_bound(to);
  if (existing != map_.end() && existing->first.starts_with(to)) {
    return AlreadyExistsError("committing " + Describe(to) + ": it already holds keys");
  }
  if (!marker_name.empty()) map_.insert_or_assign(marker_key, marker_value);
  auto it = map_.lower_bound(from);
  while (it != map_.end() && it->first.starts_with(from)) {
    std::string key = to + it->first.substr(from.size());
    Value v = std::move(it->second);
    it = map_.erase(it);
    map_.insert_or_assign(std::move(key), std::move(v));
  }
  pending_.erase(p);
  return Status::OK();
}

size_t MemoryKvStore::num_keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

uint64_t MemoryKvStore::total_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& [key, value] : map_) total += value->size();
  return total;
}

}  // namespace cairn
