// FaultKvStore: a KvStore wrapper that makes chosen writes fail, for
// crash-consistency and error-path tests.
//
// Writes are counted from 0 in call order: each Put, PutIfAbsent,
// CompareAndPut, Delete and
// ApplyBatch (a whole batch is one write, forwarded to the base as one batch)
// is one write; DeletePrefix counts one write per deleted key. A prefix
// commit counts as the steps of the protocol in kvstore.h: BeginPrefixCommit
// is one write; FinishPrefixCommit is two, the marker (written to the base
// with Put) and then the publication (the base's FinishPrefixCommit without
// a marker: file sync + rename + sync, memory move), so a fault can land
// before the marker, between marker and rename, or not at all. A failing
// write returns the configured Status and does not reach the base store.
// Reads (Get, List, ListChildren) always pass through.
//
// Thread safety: all methods may be called concurrently; with concurrent
// writers, which call gets index N is whichever arrives Nth.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

class FaultKvStore : public KvStore {
 public:
  // REQUIRES: base != nullptr.
  explicit FaultKvStore(std::shared_ptr<KvStore> base);

  // Write number `n` (0-based, counted from construction or the last Reset)
  // fails with `error`; later writes succeed. REQUIRES: !error.ok().
  void FailNthWrite(uint64_t n, Status error);
  // Every write numbered `n` or later fails with `error` (a full disk:
  // ResourceExhausted; a crash: nothing after N reaches storage).
  void FailWritesFrom(uint64_t n, Status error);
  // Clears the fault and restarts the write count at 0.
  void Reset();

  // Writes attempted so far (failed ones included) and writes failed.
  uint64_t writes_attempted() const;
  uint64_t writes_failed() const;

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override;
  Status ApplyBatch(std::vector<KvMutation> mutations) override;
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override;
  Result<bool> CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) override;
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix,
                                         std::string_view pending_prefix) override;
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                            ByteView marker) override;
  std::string url() const override { return base_->url(); }
  // Commits as its base does; every write through this store's own calls.
  StoreCapabilities Capabilities() const override {
    StoreCapabilities c;
    c.commits_in_place = base_->Capabilities().commits_in_place;
    return c;
  }

  const std::shared_ptr<KvStore>& base() const { return base_; }

 private:
  // Numbers this write; returns the error it must fail with, or OK.
  Status NextWrite(std::string_view what);

  std::shared_ptr<KvStore> base_;
  mutable std::mutex mu_;
  uint64_t count_ = 0;                // guarded by mu_
  uint64_t failed_ = 0;               // guarded by mu_
  std::optional<uint64_t> fail_at_;   // guarded by mu_
  bool fail_after_ = false;           // guarded by mu_: all writes >= fail_at_
  Status error_;                      // guarded by mu_
};

}  // namespace cairn
