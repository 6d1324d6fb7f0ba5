// Orbax step directories and the commit protocol, over any KvStore
// (Location: a store and a key prefix; location.h).
//
// Step names: `<step>`, `<prefix>_<step>`, optionally zero-padded to a
// fixed width (`step_0023`). A step counts as finalized when its name has no
// `.orbax-checkpoint-tmp` and, if the caller requires commit files (Orbax's
// COMMIT_FILE mode; stores that commit in place), it holds
// `commit_success.txt`.
//
// Commit protocol (the numbered steps are implemented in step_commit.cc;
// owner records and leases in save_owner.h; the store's own part is
// KvStore::CreatePrefixHolding / BeginPrefixCommit / FinishPrefixCommit).
// Guarantee: of concurrent saves of one step (threads, processes, hosts:
// a preempted job's async save still finishing while its restarted job
// saves the same step), at most one publishes, it publishes a whole step,
// and every other one fails saying so and leaves nothing behind.
//   1. Every save has a save id (NewSaveId: random, unique across hosts and
//      restarts). Its temporary directory is
//      `<final>.orbax-checkpoint-tmp-<id>`; Orbax treats every name holding
//      `.orbax-checkpoint-tmp` as temporary.
//   1a. Every temporary directory holds the owner record of its save
//      (`.cairn-save-owner.json`: save id, host, boot id, pid, process
//      start time, lease expiry) from the moment it exists; the owning
//      process renews the lease while the save runs (save_owner.h).
//   2. BeginCommit (primary only): AlreadyExists when `<final>` exists.
//   2a. Removes the `<final>.orbax-checkpoint-tmp*` siblings whose owner is
//       gone (its lease expired; or it ran on this host and its pid is free
//       or reused; or it is this process and the save no longer runs) or
//       that hold no owner record (Orbax's own, older cairn's). A live
//       save's directory is never removed.
//   2b. Creates its temporary directory already holding its owner record
//       (KvStore::CreatePrefixHolding: file = hidden staging directory,
//       fsync, rename without replacing), then the store's
//       BeginPrefixCommit; starts renewing the lease.
//   3. Every process writes only below the pending directory of its own save
//      id (PendingCommitFor gives it to non-primary processes). A writer of
//      an older save that straggles on writes into its own, older directory,
//      which no commit ever publishes: it can never mix into a new save.
//   4. FinishCommit (primary only, after all writers are done):
//   4a. stops renewing; the owner record must still be this save's
//       (FailedPrecondition otherwise: another save took over an expired
//       lease, and this one publishes nothing);
//   4b. the store writes `commit_success.txt` ("Checkpoint commit was
//       successful to <final>") into the pending directory, makes
//       everything durable and publishes it as `<final>` (file: fsync all,
//       rename with RENAME_NOREPLACE, fsync the parent). A reader that sees
//       `<final>` sees everything. NotFound when the pending directory was
//       removed meanwhile;
//   4c. AlreadyExists when another save published `<final>` first: this
//       save removes its temporary directory and says "checkpoint <final>
//       was published by another save while this one was writing it";
//   4d. removes the owner record from the published step (a crash just
//       before leaves a stray `.cairn-save-owner.json` that readers ignore).
//   5. A save that fails after step 2 calls AbandonCommit: it stops its
//      lease and removes its temporary directory.
//   6. Temporaries of other steps (RemoveAbandonedTemporaries): a save killed
//      before 4 or 5, the loser of a race whose winner published, a failed
//      or killed conversion leave `<name>.orbax-checkpoint-tmp-<id>` that no
//      later save of `<name>` would meet (step 2a). The engine's BeginItem
//      (every save and conversion that commits its own step), a
//      CheckpointManager's open (primary) and a resuming conversion sweep
//      the whole root:
//   6a. every directory directly under it whose name holds
//       `.orbax-checkpoint-tmp` and that holds an owner record;
//   6b. removed when its owner is gone by the rules of save_owner.h (lease
//       expired; on this machine and its pid free or reused; this process
//       and the save not live here), never while its owner may live;
//   6c. a directory it cannot attribute (no owner record: Orbax's own
//       `<step>.orbax-checkpoint-tmp`, a record it cannot parse, a deleting
//       name of step_retention.h, which its own protocol removes) is never
//       removed by this sweep: nothing read through a KvStore tells its age
//       (the one exception stays step 2a, a save of that very step, as
//       Orbax itself deletes an existing temporary directory of the step
//       it saves);
//   6d. the sweep is best effort: a failure leaves the directory for the
//       next sweep and fails nothing but the sweep.
//   7. Resuming an interrupted save of the same save id (a conversion run
//      again: ResumeCommit) takes its pending directories over: AlreadyExists
//      while their owner may live; else this process writes its own owner
//      record into each and renews it, so that no sweep removes a directory
//      a live process writes. A writer that stops without committing stops
//      renewing (StopRenewing) and keeps its directory for the next resume;
//      from then on its owner counts as gone (rule b or c of save_owner.h).
// Stores that cannot rename (Location::commits_in_place: s3://, gs://)
// write in place, so two saves there would write the same keys; instead
// the owner record is a claim on `<final>` that only one save holds:
//   2b'. BeginCommit writes `<final>/.cairn-save-owner.json` only if absent
//        (S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`). If it exists:
//        AlreadyExists when `<final>` holds commit_success.txt; AlreadyExists
//        "being written by another live save (<owner>)" while its owner
//        lives, having written nothing. A claim write that got no answer
//        is written again (stores never resend a conditional write); this
//        save's own record found there means an earlier attempt landed;
//   2c'. else (owner gone) takes the claim over with CompareAndPut against
//        the record read, so of several only one succeeds;
//   2d'. holding the claim: AlreadyExists (claim released) when the marker
//        is there; otherwise deletes every other key below `<final>` (what
//        a gone save left) and starts renewing the lease with CompareAndPut.
//   3b.  Every process writes below `<final>`.
//   4b'. FinishCommit checks the claim is still this save's, writes
//        `<final>/commit_success.txt` last and only if absent (the default
//        in-place FinishPrefixCommit), then deletes the claim. Until the
//        marker exists the directory is unfinished: ListSteps and
//        DiscoverSteps skip it, as Orbax does on GCS.
//   On object stores the claim holds while its owner renews its lease
//   (every lease/6, default lease 60 s). A save stalled for longer than its
//   lease can lose its claim to another save and still write keys under
//   `<final>` before its next renewal or its FinishCommit notices: the
//   conditional marker keeps it from publishing, but keys it writes late
//   (fixed names: manifest.ocdbt, _METADATA; OCDBT data files have random
//   names) could land in the other save's step. Hosts' clocks must agree
//   to well within a lease.
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
#include "cairn/result.h"

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

// Step 4 of the protocol (primary). AlreadyExists saying so when another
// save published the step first (this save's files are then removed).
Status FinishCommit(const PendingCommit& pending);

// Step 6: removes the temporary directories directly under `root` whose
// owner is gone (6a-6c), except the one named `keep` (a resuming
// conversion's own). Stores that commit in place have no temporary
// directories: nothing to do. The first error, having tried every one.
Status RemoveAbandonedTemporaries(const Location& root, std::string_view keep = "");

// Step 7, for one pending directory (the step's, then the item's) of a store
// that renames. FailedPrecondition on stores that commit in place.
Status ResumeCommit(const PendingCommit& pending);

// Step 5: after a save failed between BeginCommit and FinishCommit (in this
// process): stops its lease and removes what it wrote. Best effort.
void AbandonCommit(const PendingCommit& pending);

// Nanoseconds since the Unix epoch.
int64_t NowNanos();

}  // namespace cairn::orbax
