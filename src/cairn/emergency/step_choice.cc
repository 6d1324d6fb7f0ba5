#include "cairn/emergency/step_choice.h"

#include <algorithm>
#include <set>

#include "cairn/events.h"

namespace cairn::emergency {
namespace {

bool Overlap(const Box& a, const Box& b) { return !Intersect(a, b).empty(); }

StepChoice LocalChoice(const std::vector<Holding>& holdings, int64_t step) {
  StepChoice c;
  c.tier = StepChoice::Tier::kLocal;
  c.step = step;
  for (const Holding& h : holdings) {
    if (h.record.step != step) continue;
    auto& list = c.holders[h.record.process_index];
    if (std::find(list.begin(), list.end(), h.holder) == list.end()) list.push_back(h.holder);
    c.records.emplace(h.record.process_index, h.record);
  }
  for (auto& [owner, list] : c.holders) std::sort(list.begin(), list.end());
  return c;
}

}  // namespace

Status CheckComplete(const std::map<int, LocalStepRecord>& records) {
  if (records.empty()) return NotFoundError("no process holds it");
  const LocalStepRecord& first = records.begin()->second;
  for (const auto& [owner, r] : records) {
    if (r.arrays.size() != first.arrays.size()) {
      return DataLossError("processes " + std::to_string(first.process_index) + " and " +
                           std::to_string(owner) + " saved different arrays");
    }
  }
  for (const auto& [param, a] : first.arrays) {
    std::vector<Box> boxes;
    for (const auto& [owner, r] : records) {
      auto it = r.arrays.find(param);
      if (it == r.arrays.end() || it->second.shape != a.shape) {
        return DataLossError("array `" + param + "` differs between processes " +
                             std::to_string(first.process_index) + " and " + std::to_string(owner));
      }
      for (const Box& b : it->second.boxes) {
        if (b.empty() || std::find(boxes.begin(), boxes.end(), b) != boxes.end()) continue;
        for (const Box& other : boxes) {
          if (Overlap(b, other)) {
            return DataLossError("array `" + param + "`: saved boxes " + b.ToString() + " and " +
                                 other.ToString() + " overlap");
          }
        }
        boxes.push_back(b);
      }
    }
    Index covered = 0;
    for (const Box& b : boxes) covered += b.num_elements();
    const Index total = NumElements(a.shape);
    if (covered != total) {
      return NotFoundError("array `" + param + "`: the surviving copies hold " + std::to_string(covered) +
                           " of its " + std::to_string(total) + " elements");
    }
  }
  return Status::OK();
}

Result<StepChoice> ChooseStep(const std::vector<Holding>& holdings,
                              const std::vector<int64_t>& persistent_steps,
                              std::optional<int64_t> requested) {
  std::set<int64_t> local_steps;
  for (const Holding& h : holdings) local_steps.insert(h.record.step);
  std::optional<int64_t> newest_persistent;
  for (int64_t s : persistent_steps) newest_persistent = std::max(s, newest_persistent.value_or(s));
  auto persistent = [&](int64_t step, std::string reason) {
    StepChoice c;
    c.tier = StepChoice::Tier::kPersistent;
    c.step = step;
    c.reason = std::move(reason);
    return c;
  };
  if (requested) {
    std::string why = "no process holds it locally";
    if (local_steps.count(*requested)) {
      StepChoice c = LocalChoice(holdings, *requested);
      Status complete = CheckComplete(c.records);
      if (complete.ok()) {
        c.reason = "step " + std::to_string(*requested) + " (requested) is complete in the local tier";
        return c;
      }
      why = std::string(complete.message());
    }
    if (std::find(persistent_steps.begin(), persistent_steps.end(), *requested) != persistent_steps.end()) {
      StepChoice c = persistent(*requested, "step " + std::to_string(*requested) +
                                                " (requested) from the persistent tier: local tier incomplete (" + why + ")");
      EmitEvent(EventLevel::kWarning, "emergency restore falls back to the persistent tier: " + c.reason);
      return c;
    }
    return NotFoundError("step " + std::to_string(*requested) +
                         " is neither complete in the local tier (" + why + ") nor in the persistent tier");
  }
  std::string skipped;
  for (auto it = local_steps.rbegin(); it != local_steps.rend(); ++it) {
    if (newest_persistent && *it <= *newest_persistent) break;
    StepChoice c = LocalChoice(holdings, *it);
    Status complete = CheckComplete(c.records);
    if (complete.ok()) {
      c.reason = "step " + std::to_string(*it) + " is the newest complete local step" +
                 (newest_persistent ? " (newest persistent step: " + std::to_string(*newest_persistent) + ")" : "") +
                 skipped;
      return c;
    }
    skipped += "; local step " + std::to_string(*it) + " is incomplete: " + std::string(complete.message());
  }
  if (newest_persistent) {
    StepChoice c = persistent(*newest_persistent, "step " + std::to_string(*newest_persistent) +
                                                      " is the newest persistent step" + skipped);
    if (!skipped.empty()) {
      EmitEvent(EventLevel::kWarning, "emergency restore falls back to the persistent tier: " + c.reason);
    }
    return c;
  }
  StepChoice none;
  none.reason = "no complete checkpoint in either tier" + skipped;
  return none;
}

}  // namespace cairn::emergency
