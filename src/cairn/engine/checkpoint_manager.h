// CheckpointManager: numbered steps of one training run under a checkpoint
// root, laid out as orbax-checkpoint's CheckpointManager lays out a single
// item (`<root>/<step>/<item>/` + `<root>/<step>/_CHECKPOINT_METADATA`), so
// either library resumes what the other wrote.
//
// Every process of the job opens the manager with the same root, options and
// Coordinator, and calls the same methods in the same order (as Orbax's).
// The primary process lists the root and broadcasts the committed steps;
// each save is one engine save (save.h) of step directory `<step>`; after it
// commits, every process applies the retention policy (step_retention.h) to
// the same list, and the primary deletes the removed steps by the crash-safe
// deletion protocol of step_retention.h.
//
// Save protocol (Save; numbered as the code follows it):
//   1. Unless `force`: ShouldSave(step) (Orbax's default decision) or return
//      false without touching storage.
//   2. Wait for the previous save and its retention (WaitUntilFinished); its
//      error, if any, fails this call instead (as Orbax re-raises it).
//   3. AlreadyExists when the step is committed.
//   4. engine::StartSave of `<root>/<step name>` with item `item_name`: the
//      save id, temporary directories, shards, metadata and the nested
//      commit (item first, then the step) are the engine's (save.h). Returns
//      once the shards are snapshotted.
//   5. In the background (or before returning, without enable_async): wait
//      for the commit; on success add the step to the list, compute the
//      steps retention removes, drop them from the list, and (primary)
//      delete each by DeleteStep. A crash at any point leaves every step
//      either whole and listed or invisible.
// Opening (primary) also removes leftovers of interrupted deletions
// (RemoveDeletingLeftovers) and the temporary directories of saves whose
// owner is gone (orbax::RemoveAbandonedTemporaries, step 6 of
// layout/orbax/step.h), in the background.
//
// Thread safety: like Orbax's manager, one thread drives a manager; the
// background work synchronizes with it internally.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/engine/save.h"
#include "cairn/engine/save_request.h"
#include "cairn/engine/step_retention.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::engine {

// Items of a step besides the PyTree item, written by the primary into the
// step directory before its commit (Orbax JSON items: `<name>/metadata`).
struct StepExtras {
  std::vector<std::pair<std::string, std::string>> files;  // path relative to the step; content
  std::map<std::string, std::string> item_handlers;         // item name -> Orbax handler typestr
  // The PyTree item's name in this step, when not ManagerOptions::item_name
  // (Orbax's managers name items per save: `Composite(items=...)`).
  std::string item_name;
  // The value of the step's metrics (RetentionPolicy::by_score).
  std::optional<double> score;
  // The step's `_CHECKPOINT_METADATA` custom_metadata (null: {}).
  Json custom_metadata;
  // This step's progress callback (SaveOptions::progress); empty: the
  // manager's save options'.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
};

struct ManagerOptions {
  // Orbax's save_interval_steps (>= 1): ShouldSave is true for multiples of
  // it (and for the first save).
  int64_t save_interval_steps = 1;
  RetentionPolicy retention;
  // Save returns once the shards are snapshotted; commit and retention run
  // in the background until WaitUntilFinished.
  bool enable_async = true;
  orbax::StepNameFormat step_format;
  std::string item_name = "default";
  // Stores that commit in place (no rename): a step counts only with its
  // commit_success.txt (Orbax's rule on object stores).
  bool require_commit_file = false;
  SaveOptions save;  // every step's save; `timeout` also bounds the manager's collectives
};

// Named points a test can stop a process at (ManagerHooks::at_point), in
// the order a save reaches them; DeleteStep adds kPointBeforeDeleteRename and
// kPointDeleteRenamed (step_retention.h) during retention.
inline constexpr std::string_view kPointSaveStarted = "save_started";        // shards snapshotted
inline constexpr std::string_view kPointDataWritten = "data_written";        // before the item's `_METADATA`
inline constexpr std::string_view kPointBeforeItemCommit = "before_item_commit";
inline constexpr std::string_view kPointBeforeStepCommit = "before_step_commit";  // before the step's rename
inline constexpr std::string_view kPointStepCommitted = "step_committed";    // before retention

struct ManagerHooks {
  // Called at each named point on the process that reaches it (tests: a
  // crash there). Set: the root's store is wrapped to report the points.
  std::function<void(std::string_view)> at_point;
  SaveHooks save;
};

class CheckpointManager {
 public:
  // InvalidArgument for bad options; the store's errors listing `root`. A
  // missing root is an empty one (the first save creates it).
  static Result<std::unique_ptr<CheckpointManager>> Open(const orbax::Location& root,
                                                         const ManagerOptions& options,
                                                         Coordinator& coordinator, ManagerHooks hooks = {});
  ~CheckpointManager();  // Close(), errors dropped
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  const orbax::Location& root() const { return root_; }
  const ManagerOptions& options() const { return options_; }

  // Orbax's default decision (ShouldSaveStep) over the committed steps.
  bool ShouldSave(int64_t step) const;
  // The save protocol above. False when step 1 declines; true once the save
  // is started (async) or committed with its retention done (sync).
  // `leaves` must stay valid until Save returns.
  Result<bool> Save(int64_t step, std::vector<SaveLeaf> leaves, bool force = false,
                    StepExtras extras = {});
  // Blocks until the background save and retention are done; returns (once)
  // their first error.
  Status WaitUntilFinished();

  // Committed steps and the one being saved in the background (as Orbax's
  // all_steps lists it), ascending, as of the last commit, retention or
  // Reload. A save that fails drops its step.
  std::vector<int64_t> AllSteps() const;
  std::optional<int64_t> LatestStep() const;
  // The step being saved in the background, if any.
  std::optional<int64_t> PendingStep() const;
  // The directory of a committed step; FailedPrecondition for the step still
  // being saved (WaitUntilFinished first); NotFound for another step.
  Result<orbax::Location> StepLocation(int64_t step) const;

  // Deletes a committed step (DeleteStep on the primary; every process
  // agrees on the outcome). NotFound for a step that is not committed.
  Status Delete(int64_t step);
  // Lists the root again (the primary's view, broadcast).
  Status Reload();
  // The scores of committed steps (their metrics' values, read back by the
  // caller after Open or Reload) for retention by score.
  void SetScores(std::map<int64_t, double> scores);
  // WaitUntilFinished, then refuses further saves (FailedPrecondition).
  Status Close();

 private:
  CheckpointManager(orbax::Location root, ManagerOptions options, Coordinator& coordinator, ManagerHooks hooks);
  Status LoadSteps(std::string_view why);
  void JoinWorker();
  void At(std::string_view point) const {
    if (hooks_.at_point) hooks_.at_point(point);
  }
  // Step 5 after a commit: list and retention; the deletions (primary).
  Status AfterCommit(int64_t step, const std::string& name);
  std::string CollectiveName(std::string_view what) const;

  orbax::Location root_;
  ManagerOptions options_;
  Coordinator& coordinator_;
  ManagerHooks hooks_;
  std::thread worker_;     // the background part of the last save (or the opening cleanup)
  Status worker_status_;   // written by the worker, read after joining it
  bool closed_ = false;
  mutable std::mutex mu_;
  std::map<int64_t, std::string> steps_;  // guarded by mu_: committed step -> directory name
  std::optional<int64_t> pending_;        // guarded by mu_: the step being saved
  std::map<int64_t, double> scores_;      // guarded by mu_: step -> its metrics' value
};

}  // namespace cairn::engine
