// Steps of a checkpoint root as a CheckpointManager sees them: which to save
// and keep (Orbax's default policies), which are committed, and how one is
// deleted so that a crash never leaves part of a step looking valid.
//
// Step deletion protocol (DeleteStep; every step goes through the step's
// KvStore only):
//   1. Pick a fresh deleting name for the step directory `<name>`:
//      `<name>.cairn-deleting-<id>.orbax-checkpoint-tmp` (random id, as save
//      ids). It holds `.orbax-checkpoint-tmp`, so cairn (orbax::ListSteps,
//      DiscoverSteps) and Orbax (its step-name pattern and temporary-path
//      rules) never take it for a step.
//   2. BeginPrefixCommit(final = the deleting name, pending = `<name>/`):
//      the store's prefix commit is used as a rename of the step directory.
//   3a. Stores that rename (file, memory): FinishPrefixCommit without a
//      marker publishes the step's whole tree under the deleting name
//      (file: fsync the tree, rename(2), fsync the parent). From here on the
//      step is invisible, all at once; before it, it is whole.
//   3b. Stores that commit in place (PrefixCommit::in_place: no rename):
//      delete `<name>/commit_success.txt` first. Readers of such stores
//      require that marker (ListCommittedSteps with require_commit_file), so
//      the step is invisible from here on.
//   4. DeletePrefix of the renamed tree (3a) or of `<name>/` (3b). A crash
//      part way leaves only a deleting-named or unmarked tree: invisible.
//   5. RemoveDeletingLeftovers (run by a manager when it opens a root)
//      removes trees a crash left under deleting names.
//
// Thread safety: pure functions; DeleteStep and RemoveDeletingLeftovers may
// run concurrently for different steps.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/result.h"

namespace cairn::engine {

// Which committed steps a manager keeps (Orbax's CheckpointManagerOptions
// defaults: the newest `max_to_keep`, plus every step divisible by
// `keep_period`; unset = no such rule). With `by_score` (Orbax's `best_fn`:
// its BestN policy), `max_to_keep` counts the best scored steps instead of
// the newest: steps sorted by score (ascending when `higher_is_better`,
// else descending; equal scores in step order) keep the last `max_to_keep`;
// steps without a score are kept when `keep_unscored`.
struct RetentionPolicy {
  std::optional<int64_t> max_to_keep;
  std::optional<int64_t> keep_period;
  bool by_score = false;
  bool higher_is_better = true;
  bool keep_unscored = true;
};

// InvalidArgument for max_to_keep < 0 or keep_period < 1.
Status CheckRetentionPolicy(const RetentionPolicy& policy);

// The steps of `steps` (ascending, committed) that `policy` removes,
// ascending. A step is kept when it is among the newest max_to_keep (all
// steps when max_to_keep is unset) or divisible by keep_period.
// `scores`: step -> the value of its metrics (by_score only; steps missing
// from it have no metrics).
std::vector<int64_t> StepsToRemove(const std::vector<int64_t>& steps, const RetentionPolicy& policy,
                                   const std::map<int64_t, double>& scores = {});

// Orbax's default save decision: never at or below the latest committed step;
// otherwise when `step` is a multiple of `save_interval_steps` or nothing is
// committed yet. REQUIRES: save_interval_steps >= 1; steps ascending.
bool ShouldSaveStep(int64_t step, const std::vector<int64_t>& steps, int64_t save_interval_steps);

// Committed steps under `root` in `format`, ascending: orbax::ListSteps,
// requiring commit_success.txt when `require_commit_file` (stores that
// commit in place). Temporary and deleting names are never steps. NotFound
// when `root` does not exist.
Result<std::vector<orbax::StepInfo>> ListCommittedSteps(const orbax::Location& root,
                                                        const orbax::StepNameFormat& format,
                                                        bool require_commit_file);

// `<step_name>.cairn-deleting-<id>.orbax-checkpoint-tmp` (step 1).
std::string DeletingName(std::string_view step_name, std::string_view id);
bool IsDeletingName(std::string_view name);

// Named points of DeleteStep, for crash tests.
inline constexpr std::string_view kPointBeforeDeleteRename = "before_delete_rename";
inline constexpr std::string_view kPointDeleteRenamed = "delete_renamed";

// Deletes the step directory `step` by the protocol above. `at_point`
// (tests) is called at the named points. NotFound when it does not exist.
Status DeleteStep(const orbax::Location& step,
                  const std::function<void(std::string_view)>& at_point = {});

// Step 5: removes every deleting-named tree directly under `root`.
Status RemoveDeletingLeftovers(const orbax::Location& root);

}  // namespace cairn::engine
