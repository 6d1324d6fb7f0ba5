// CountingKvStore: a store that passes every call to another one and adds
// up the bytes its reads return (Get, GetInto, GetAtMost, GetMany), so that
// a checkpoint reader can say how many stored bytes it read
// (CheckpointReader::StoredBytesRead): a conversion that reads each stored
// chunk once reads the source's stored bytes, one that decodes a chunk
// again for every part of it reads them again.
//
// Thread safety: as the store below; the count is atomic.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/kvstore/forwarding_kvstore.h"

namespace cairn::layout {

class CountingKvStore final : public ForwardingKvStore {
 public:
  explicit CountingKvStore(std::shared_ptr<KvStore> base) : ForwardingKvStore(std::move(base)) {}

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override {
    auto got = base_->Get(key, range);
    if (got.ok() && got->has_value()) read_ += (*got)->size();
    return got;
  }
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override {
    auto found = base_->GetInto(key, dst);
    if (found.ok() && *found) read_ += dst.size();
    return found;
  }
  Result<std::optional<Buffer>> GetAtMost(std::string_view key, uint64_t max_bytes) override {
    auto got = base_->GetAtMost(key, max_bytes);
    if (got.ok() && got->has_value()) read_ += (*got)->size();
    return got;
  }
  Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) override {
    return base_->GetMany(reads, [&](size_t index, std::optional<ByteView> value) {
      if (value) read_ += value->size();
      return fn(index, value);
    });
  }
  uint64_t bytes_read() const { return read_.load(); }

 private:
  std::atomic<uint64_t> read_{0};
};

}  // namespace cairn::layout
