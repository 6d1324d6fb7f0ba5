// Choosing the step to restore after a restart.
//
// Input: every local step and peer copy each process holds now (exchanged
// through the coordinator) and the persistent tier's finalized steps.
//
// Rule (every process computes it from the same input, so all agree):
//   1. A local step is *complete* when the steps of it that survive (own or
//      peer copies, on any process) together hold every element of every
//      array: their distinct boxes, which must be disjoint or equal, add up
//      to each array's shape; and all of them agree on the arrays and shapes.
//   2. Without a requested step: the newest complete local step that is
//      newer than the newest persistent step; else the newest persistent
//      step; else nothing (a fresh start).
//   3. With a requested step: that step from the local tier when complete
//      there, else from the persistent tier when it has it, else NotFound.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cairn/emergency/local_step.h"

namespace cairn::emergency {

struct StepChoice {
  enum class Tier { kNone, kLocal, kPersistent };
  Tier tier = Tier::kNone;
  int64_t step = -1;
  // Local tier: for each owner whose step survives, the processes holding a
  // copy (ascending), and that owner's record.
  std::map<int, std::vector<int>> holders;
  std::map<int, LocalStepRecord> records;
  std::string reason;  // one sentence for the log
};

// Whether the surviving owners' records of one step cover every array
// (rule 1); the reason when not.
Status CheckComplete(const std::map<int, LocalStepRecord>& records);

Result<StepChoice> ChooseStep(const std::vector<Holding>& holdings,
                              const std::vector<int64_t>& persistent_steps,
                              std::optional<int64_t> requested);

}  // namespace cairn::emergency
