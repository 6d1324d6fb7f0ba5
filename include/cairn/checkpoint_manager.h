// cairn's CheckpointManager, for C++ programs: numbered steps of a training
// run under one root directory, laid out exactly as orbax-checkpoint's
// CheckpointManager lays out a single item (`<root>/<step>/default/`), so
// Orbax restores and resumes what cairn saved and the other way round.
//
// Contract:
//   - Every process of the job opens the manager with the same directory,
//     options and Coordinator (include/cairn/coordinator.h), and calls the
//     same methods in the same order.
//   - Save(step, arrays) saves unless ShouldSave(step) says no (then it
//     returns false, as Orbax does; `force` skips the check). ShouldSave is
//     Orbax's default: a multiple of save_interval_steps (or the first save)
//     above the latest committed step.
//   - After each commit the manager keeps the newest max_to_keep steps and
//     every step divisible by keep_period (Orbax's rule) and deletes the
//     others in the background, by renaming each step to an ignored name
//     before removing its files: a crash never leaves part of a step
//     visible (docs/CHECKPOINT_MANAGER.md).
//   - With enable_async, Save returns once the shards are copied into
//     cairn's memory; WaitUntilFinished returns after the commit and the
//     retention, with their first error.
//
// Thread safety: one thread drives a manager.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/engine.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

// How steps are kept and named; how each step is stored is `save`.
struct CheckpointManagerOptions {
  // ShouldSave is true for multiples of this (>= 1) and for the first save.
  int64_t save_interval_steps = 1;
  std::optional<int64_t> max_to_keep;  // the newest steps kept; unset: every step
  std::optional<int64_t> keep_period;  // steps divisible by this are kept too
  // Save returns once the shards are copied; the commit and the retention
  // run in the background until WaitUntilFinished.
  bool enable_async = true;
  std::string step_prefix;                     // "": steps are named `<step>`
  std::optional<int> step_format_fixed_length;  // zero-pad step numbers to this width
  SaveCheckpointOptions save;                   // every step's save (engine.h)
  std::string item_name = "default";            // the PyTree item of each step
  // Retention by score (Orbax's best_fn): max_to_keep keeps the best-scored
  // steps instead of the newest (SetScores and StepSaveOptions::score).
  bool retention_by_score = false;
  bool higher_is_better = true;  // by score: the highest scores are the best
  bool keep_unscored = true;     // by score: steps without a score are kept
  // Observer, called at the named points a save or a deletion reaches
  // (save_started, data_written, before_item_commit, before_step_commit,
  // step_committed, before_delete_rename, delete_renamed) on the thread
  // that reaches them; crash tests stop the process there. Empty: none.
  std::function<void(std::string_view point)> at_point;
};

// What one step saves besides its arrays.
struct StepSaveOptions {
  // Small files the primary writes into the step directory before its
  // commit (path relative to it, "a/metadata"; content): Orbax JSON items.
  std::vector<std::pair<std::string, std::string>> extra_files;
  // Items of the step besides the PyTree item: name -> the typestr of the
  // Orbax handler that reads them, recorded in `_CHECKPOINT_METADATA`.
  std::map<std::string, std::string> extra_item_handlers;
  std::string item_name;        // the PyTree item's name; "": the options'
  std::optional<double> score;  // the step's metrics' value (retention by score)
  // `_CHECKPOINT_METADATA`'s custom_metadata as JSON text ("null": {}).
  std::string custom_metadata_json = "null";
  // Called with the bytes this process has written of the step's arrays,
  // as SaveOptions::progress (engine.h) is, on the save's threads; empty:
  // none.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
};

// Opened like EmergencyCheckpointManager (emergency.h): a static Open that
// takes the options and the job's Coordinator.
class CheckpointManager {
 public:
  // Opens the steps under `directory` (a path or a URL; missing: empty, the
  // first save creates it). Result: the manager, its steps listed.
  // Errors: InvalidArgument for bad options (a compression name, an
  // interval below 1); the store's errors naming the directory; Unavailable
  // when the other processes do not open it within the save timeout.
  static Result<std::unique_ptr<CheckpointManager>> Open(const std::string& directory,
                                                         const CheckpointManagerOptions& options,
                                                         Coordinator& coordinator);
  virtual ~CheckpointManager() = default;  // waits for the background work

  // Result: whether Save(step) would save (Orbax's ShouldSaveStep).
  virtual bool ShouldSave(int64_t step) const = 0;
  // Saves `arrays` (this process's shards) as `step`. Result: false when
  // the step is not saved (ShouldSave said no and `force` is false), true
  // once it is started (enable_async) or committed.
  // Errors: AlreadyExists for a committed step; InvalidArgument for arrays
  // that do not fit their shapes or an unknown dtype; FailedPrecondition
  // after Close; InvalidArgument naming custom_metadata for text that is
  // not JSON; the store's errors naming the key; Unavailable when the
  // other processes do not arrive within the timeout.
  virtual Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force = false,
                            const StepSaveOptions& step_options = {}) = 0;
  // Blocks until the background commits and retention are done.
  // Errors: their first error (returned once).
  virtual Status WaitUntilFinished() = 0;
  // Result: the committed steps and the one being saved, ascending (as
  // Orbax's all_steps). Errors: none today (a Result like the emergency
  // manager's, whose listing is collective).
  virtual Result<std::vector<int64_t>> AllSteps() const = 0;
  // Result: the newest of AllSteps, or nullopt when there is none.
  virtual Result<std::optional<int64_t>> LatestStep() const = 0;
  // Result: the step being saved in the background, or nullopt.
  virtual std::optional<int64_t> PendingStep() const = 0;
  // Result: the directory of a committed step. Errors: NotFound for a step
  // that is not committed; FailedPrecondition for the step being saved.
  virtual Result<std::string> StepPath(int64_t step) const = 0;
  // Result: the root directory the manager was opened on, as a path or URL.
  virtual std::string directory() const = 0;
  // Lists the root again (the primary's view, shared with every process).
  // Errors: the store's, naming the root; Unavailable as Save's.
  virtual Status Reload() = 0;
  // The scores of committed steps (their metrics' values, read back after
  // Open or Reload) for retention by score.
  virtual void SetScores(std::map<int64_t, double> scores) = 0;
  // Reads the requested boxes of a committed step (as RestoreCheckpoint).
  // Errors: NotFound for a step that is not committed; FailedPrecondition
  // for the step still being saved; RestoreCheckpoint's errors.
  virtual Status Restore(int64_t step, const std::vector<RestoreArray>& arrays) const = 0;
  // Deletes a committed step (a crash leaves it whole or gone).
  // Errors: NotFound for a step that is not committed; the store's errors.
  virtual Status Delete(int64_t step) = 0;
  // WaitUntilFinished, then refuses further saves (FailedPrecondition).
  // Errors: WaitUntilFinished's.
  virtual Status Close() = 0;
};

}  // namespace cairn
