// MemoryKvStore: a KvStore held in process memory (a sorted map).
//
// `memory://` URLs all name one process-wide instance (`Default()`), so that
// `memory://x/` opened twice sees the same data; the URL path becomes a key
// prefix (prefix_kvstore.h). Nothing is persisted.
//
// Values are immutable once stored and shared by reference, so a Get
// concurrent with a Put of the same key returns the old or the new value.
// ApplyBatch is atomic: no reader sees part of a batch.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

class MemoryKvStore : public KvStore {
 public:
  // A fresh, empty store; `url` is what error messages call it.
  explicit MemoryKvStore(std::string url = "memory://");

  // The process-wide store behind every `memory://` URL. Never destroyed.
  static std::shared_ptr<MemoryKvStore> Default();

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override;
  // Validates every key first, then applies all mutations under one lock.
  Status ApplyBatch(std::vector<KvMutation> mutations) override;
  Status DeletePrefix(std::string_view prefix) override;
  // Prefix commit (kvstore.h): Finish writes the marker and moves every key
  // from the pending to the final prefix under one lock, so readers see all
  // of them or none. ListChildren is the default (from List).
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix,
                                         std::string_view pending_prefix) override;
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                            ByteView marker) override;
  // Prefixes are renamed into place: not committed in place.
  StoreCapabilities Capabilities() const override {
    StoreCapabilities c;
    c.commits_in_place = false;
    return c;
  }
  std::string url() const override { return url_; }

  // Number of keys and total value bytes held (for tests and memory accounting).
  size_t num_keys() const;
  uint64_t total_bytes() const;

 private:
  using Value = std::shared_ptr<const Buffer>;
  const std::string url_;
  mutable std::mutex mu_;
  std::map<std::string, Value, std::less<>> map_;  // guarded by mu_
  // Pending prefixes of unfinished prefix commits (the memory analogue of a
  // temporary directory): DeletePrefix removes those it covers, so a
  // FinishPrefixCommit after a newer Begin removed its prefix is NotFound.
  std::set<std::string, std::less<>> pending_;  // guarded by mu_
};

}  // namespace cairn
