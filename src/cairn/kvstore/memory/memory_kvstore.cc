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
