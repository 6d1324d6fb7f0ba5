// Retention of the emergency tiers: which old steps go, and how, so that a
// crash part way through never leaves a half-deleted step that a listing or
// a restore takes for whole.
//
// Deletion protocol (the one of engine/step_retention.h, not a copy of it):
//   1. KeepNewestSteps lists the steps directly under a root (orbax::ListSteps,
//      as every reader of the tiers does) and picks all but the newest `keep`.
//   2. Each goes through engine::DeleteStep: renamed to a deleting name that
//      holds `.orbax-checkpoint-tmp` (stores that rename) or its commit
//      marker removed first (stores that commit in place), then deleted. From
//      that first write on, no listing (ListHoldings, ListSteps, Orbax's own)
//      shows the step; before it, the step is whole.
//   3. RemoveInterruptedDeletions (EmergencyCheckpointManager::Open) removes
//      the trees a crash left under deleting names: in the local tier, in each
//      owner's directory of `peer_copies/`, and in the persistent tier.
// The roots it applies to: `<local>/` (own steps), `<local>/peer_copies/
// process_<o>/` (copies of owner o's steps) and `<persistent>/`.
//
// Thread safety: pure functions over the stores; one manager runs them.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "cairn/layout/orbax/location.h"
#include "cairn/status.h"

namespace cairn::emergency {

// Steps 1-2: deletes all but the newest `keep` steps directly under `root`
// (nothing when keep <= 0 or root does not exist). `at_point` is passed to
// engine::DeleteStep (its named points, for crash tests). The first error,
// naming the step; the steps before it are gone, the others whole.
Status KeepNewestSteps(const orbax::Location& root, int keep,
                       const std::function<void(std::string_view)>& at_point = {});

// Step 3, for the local tier's own steps and peer copies, and the persistent
// tier when `persistent` is not null (the primary's job: one process per
// shared root). Roots that do not exist are fine.
Status RemoveInterruptedDeletions(const orbax::Location& local, const orbax::Location* persistent);

// Removes the pending directories of interrupted receipts (dir_transfer.h step 2's
// `<step>.orbax-checkpoint-tmp-resumable`) directly under `dir` (one
// owner's peer copies) for steps up to `up_to_step`. The emergency manager
// calls it at retention, once its receipts of `up_to_step` have ended: no
// sender sends those steps again (a re-saved step has another source id and
// starts afresh), so nothing can resume them. Plain deletion: a pending
// directory is never listed as a step, whole or half-deleted.
Status RemoveUnfinishedReceipts(const orbax::Location& dir, int64_t up_to_step);

}  // namespace cairn::emergency
