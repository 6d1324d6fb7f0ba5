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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/engine.h"
#include "cairn/util/result.h"
#include "cairn/util/status.h"

namespace cairn {

struct CheckpointManagerOptions {
  int64_t save_interval_steps = 1;
  std::optional<int64_t> max_to_keep;  // unset: keep every step
  std::optional<int64_t> keep_period;  // also keep steps divisible by this
  bool enable_async = true;
  std::string step_prefix;                     // "" : steps are named `<step>`
  std::optional<int> step_format_fixed_length;  // zero-pad step numbers
  SaveCheckpointOptions save;                   // every step's save
};

class CheckpointManager {
 public:
  // Errors: InvalidArgument for bad options; the store's errors listing the
  // directory (a missing directory is an empty one).
  static Result<std::unique_ptr<CheckpointManager>> Open(const std::string& directory,
                                                         const CheckpointManagerOptions& options,
                                                         Coordinator& coordinator);
  virtual ~CheckpointManager() = default;  // waits for the background work

  virtual bool ShouldSave(int64_t step) const = 0;
  // False when the step is not saved (ShouldSave said no); AlreadyExists for
  // a committed step.
  virtual Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force = false) = 0;
  virtual Status WaitUntilFinished() = 0;
  virtual std::vector<int64_t> AllSteps() const = 0;
  virtual std::optional<int64_t> LatestStep() const = 0;
  // Reads the requested boxes of a committed step (as RestoreCheckpoint).
  virtual Status Restore(int64_t step, const std::vector<RestoreArray>& arrays) const = 0;
  virtual Status Delete(int64_t step) = 0;
  virtual Status Close() = 0;
};

}  // namespace cairn
