// A store that cannot rename, as the object stores are: every call goes to
// `base` (a fresh MemoryKvStore by default), and the prefix commit is
// KvStore's default one (in place, the marker written last; Capabilities()
// says commits_in_place). Tests of the protocols that run differently on
// renaming and in-place stores use it to run both over memory.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"

namespace cairn::testing {

class InPlaceStore final : public KvStore {
 public:
  explicit InPlaceStore(std::shared_ptr<KvStore> base = std::make_shared<MemoryKvStore>())
      : base_(std::move(base)) {}
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override {
    return base_->Get(key, range);
  }
  Status Put(std::string_view key, ByteView value) override { return base_->Put(key, value); }
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override { return base_->PutIfAbsent(key, value); }
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected, ByteView value) override {
    return base_->CompareAndPut(key, expected, value);
  }
  Status Delete(std::string_view key) override { return base_->Delete(key); }
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override { return base_->List(prefix); }
  std::string url() const override { return base_->url(); }

 private:
  std::shared_ptr<KvStore> base_;
};

}  // namespace cairn::testing
