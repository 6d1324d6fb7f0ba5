// Orbax step directories and the commit protocol, over any KvStore
// (Location: a store and a key prefix; location.h).
//
// Step names: `<step>`, `<prefix>_<step>`, optionally zero-padded to a
// fixed width (`step_0023`). A step counts as finalized when its name has no
// `.orbax-checkpoint-tmp` and, if the caller requires commit files (Orbax's
// COMMIT_FILE mode; stores that commit in place), it holds
// `commit_success.txt`.
//
// Commit protocol (the numbered steps are implemented in step.cc; the
// store's own part is KvStore::BeginPrefixCommit / FinishPrefixCommit):
//   1. Every save has a save id (NewSaveId: random, unique across hosts and
//      restarts). Its temporary directory is
//      `<final>.orbax-checkpoint-tmp-<id>`; Orbax treats every name holding
//      `.orbax-checkpoint-tmp` as temporary.
//   2. BeginCommit (primary only): AlreadyExists when `<final>` exists;
//      removes every leftover `<final>.orbax-checkpoint-tmp*` sibling of
//      other saves (KvStore::DeletePrefix); then the store prepares the
//      pending directory of this save's id.
//   3. Every process writes only below the pending directory of its own save
//      id (PendingCommitFor gives it to non-primary processes). A writer of
//      an older save that straggles on writes into its own, older directory,
//      which no commit ever publishes: it can never mix into a new save.
//   4. FinishCommit (primary only, after all writers are done): the store
//      writes `commit_success.txt` ("Checkpoint commit was successful to
//      <final>") into the pending directory, makes everything durable and
//      publishes it as `<final>` (file: fsync all, rename, fsync the parent).
//      A reader that sees `<final>` sees everything. NotFound when a newer
//      save's BeginCommit removed the pending directory meanwhile.
// Stores that cannot rename (Location::commits_in_place: s3://, gs://)
// follow the same steps with the pending directory being `<final>` itself
// (KvStore's default in-place prefix commit):
//   2b. BeginCommit: a `<final>` without commit_success.txt is what an
//       interrupted save left; it is removed (DeletePrefix) instead of
//       refused. A `<final>` with the marker is AlreadyExists.
//   2c. Nothing else: no save on such a store writes a temporary sibling,
//       so none is looked for, and the pending directory is `<final>`.
//   3b. Every process writes below `<final>`.
//   4b. FinishCommit writes `<final>/commit_success.txt` last (one Put).
//       Until it exists the directory is unfinished: ListSteps and
//       DiscoverSteps skip it, as Orbax does on GCS.
// Nested items (`<step>.tmp-<id>/<item>.tmp-<id>`) are committed innermost
// first.
//
// Thread safety: pure functions over the store; callers serialize commits
// of one final location.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/layout/orbax/location.h"
#include "cairn/util/result.h"

namespace cairn::orbax {

inline constexpr std::string_view kTmpSuffix = ".orbax-checkpoint-tmp";

struct StepNameFormat {
  std::string prefix;                  // empty: names are bare numbers
  std::optional<int> fixed_length;     // zero-pad the number to this width
};

// `23`, `0023`, `step_23`, `step_0023`.
std::string StepName(int64_t step, const StepNameFormat& format);

// The step of `name` under `format`, or nullopt when the name does not
// follow it (Orbax's discovery regex: no leading zeros unless fixed width,
// at least `fixed_length` digits).
std::optional<int64_t> ParseStepName(std::string_view name, const StepNameFormat& format);

// True when `name` contains `.orbax-checkpoint-tmp` (any suffix after it).
bool IsTmpName(std::string_view name);

struct StepInfo {
  int64_t step = 0;
  Location location;  // the step directory
  std::string path() const { return location.Path(); }
};

// Finalized steps under `root`, sorted by step. `require_commit_file` (and
// every root that commits in place) skips directories without
// commit_success.txt. NotFound when `root` does
// not exist; the store's errors for listing.
Result<std::vector<StepInfo>> ListSteps(const Location& root, const StepNameFormat& format,
                                        bool require_commit_file = false);

// Tries every common format (bare, any `<prefix>_`, fixed width) for
// directories under `root` that look like Orbax steps: finalized and holding
// `_CHECKPOINT_METADATA`, `commit_success.txt` or an item directory. Sorted.
// On roots that commit in place only directories with commit_success.txt.
Result<std::vector<StepInfo>> DiscoverSteps(const Location& root);

// A fresh save id: 16 lowercase hex digits from the system's random source.
std::string NewSaveId();

// `<name>.orbax-checkpoint-tmp-<save_id>`.
std::string TmpName(std::string_view final_name, std::string_view save_id);

struct PendingCommit {
  Location final_location;  // what the save becomes
  Location location;        // where its files are written until then
  std::string save_id;
  PrefixCommit commit;      // the store's view (prefixes in the store)
};

// Step 2 of the protocol (primary). InvalidArgument for an empty or
// non-hex save id or a location at the store's root.
Result<PendingCommit> BeginCommit(const Location& final_location, std::string_view save_id);

// Step 3 for non-primary processes: the pending location of save `save_id`
// without touching storage (stores that rename; in-place stores write to
// `final_location` itself).
PendingCommit PendingCommitFor(const Location& final_location, std::string_view save_id);

// For processes that did not receive the save id: the one pending save of
// `final_location` (after the primary's BeginCommit). NotFound when there is
// none; FailedPrecondition when there are several (pass the save id). On
// stores that commit in place: the final directory itself (save id "").
Result<PendingCommit> FindPendingCommit(const Location& final_location);

// Step 4 of the protocol (primary).
Status FinishCommit(const PendingCommit& pending);

// Nanoseconds since the Unix epoch.
int64_t NowNanos();

}  // namespace cairn::orbax
