// Implements step_retention.h; DeleteStep follows the numbered deletion
// protocol at the top of that header, step by step.
#include "cairn/engine/step_retention.h"

#include <algorithm>
#include <set>

#include "cairn/layout/orbax/metadata_files.h"

namespace cairn::engine {
namespace {

constexpr std::string_view kDeletingInfix = ".cairn-deleting-";

void At(const std::function<void(std::string_view)>& at_point, std::string_view point) {
  if (at_point) at_point(point);
}

}  // namespace

Status CheckRetentionPolicy(const RetentionPolicy& policy) {
  if (policy.max_to_keep && *policy.max_to_keep < 0) {
    return InvalidArgumentError("max_to_keep must be >= 0, not " + std::to_string(*policy.max_to_keep));
  }
  if (policy.keep_period && *policy.keep_period < 1) {
    return InvalidArgumentError("keep_period must be >= 1, not " + std::to_string(*policy.keep_period));
  }
  return Status::OK();
}

std::vector<int64_t> StepsToRemove(const std::vector<int64_t>& steps, const RetentionPolicy& policy,
                                   const std::map<int64_t, double>& scores) {
  std::vector<int64_t> out;
  const size_t n = steps.size();
  const size_t keep = policy.max_to_keep ? static_cast<size_t>(std::max<int64_t>(*policy.max_to_keep, 0)) : n;
  std::vector<bool> kept(n, false);
  if (!policy.by_score) {
    for (size_t i = 0; i < n; ++i) kept[i] = i + keep >= n;
  } else if (!policy.max_to_keep || n <= keep) {
    kept.assign(n, true);  // Orbax's BestN keeps all while there are no more than n
  } else {
    std::vector<size_t> scored;
    for (size_t i = 0; i < n; ++i) {
      if (scores.count(steps[i]) != 0) scored.push_back(i);
      else kept[i] = policy.keep_unscored;
    }
    std::stable_sort(scored.begin(), scored.end(), [&](size_t a, size_t b) {
      const double x = scores.at(steps[a]), y = scores.at(steps[b]);
      return policy.higher_is_better ? x < y : x > y;
    });
    for (size_t j = scored.size() > keep ? scored.size() - keep : 0; j < scored.size(); ++j) kept[scored[j]] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const bool periodic = policy.keep_period && steps[i] % *policy.keep_period == 0;
    if (!kept[i] && !periodic) out.push_back(steps[i]);
  }
  return out;
}

bool ShouldSaveStep(int64_t step, const std::vector<int64_t>& steps, int64_t save_interval_steps) {
  if (!steps.empty() && steps.back() >= step) return false;
  return steps.empty() || (save_interval_steps >= 1 && step % save_interval_steps == 0);
}

Result<std::vector<orbax::StepInfo>> ListCommittedSteps(const orbax::Location& root,
                                                        const orbax::StepNameFormat& format,
                                                        bool require_commit_file) {
  // ListSteps skips every name holding `.orbax-checkpoint-tmp`, deleting
  // names included.
  return orbax::ListSteps(root, format, require_commit_file);
}

std::string DeletingName(std::string_view step_name, std::string_view id) {
  return std::string(step_name) + std::string(kDeletingInfix) + std::string(id) +
         std::string(orbax::kTmpSuffix);
}

bool IsDeletingName(std::string_view name) {
  const size_t infix = name.find(kDeletingInfix);
  return infix != std::string_view::npos && infix > 0 && name.ends_with(orbax::kTmpSuffix);
}

Status DeleteStep(const orbax::Location& step, const std::function<void(std::string_view)>& at_point) {
  const std::string what = "deleting step " + step.Path();
  if (step.prefix.empty()) return InvalidArgumentError(what + ": it is the root of its store");
  if (!orbax::Exists(step)) return NotFoundError(what + ": it does not exist");
  KvStore& store = *step.store;
  // Step 1.
  const orbax::Location parent = step.Parent();
  const orbax::Location deleting = parent.Child(DeletingName(step.Name(), orbax::NewSaveId()));
  // Step 2.
  At(at_point, kPointBeforeDeleteRename);
  CAIRN_ASSIGN_OR_RETURN(PrefixCommit rename, store.BeginPrefixCommit(deleting.prefix, step.prefix));
  std::string tree;
  if (!rename.in_place) {
    // Step 3a.
    CAIRN_RETURN_IF_ERROR(store.FinishPrefixCommit(rename, "", {}).Annotate(what + ": renaming it to " + deleting.Path()));
    tree = deleting.prefix;
  } else {
    // Step 3b.
    CAIRN_RETURN_IF_ERROR(store.Delete(step.Key(orbax::kCommitSuccessFile))
                              .Annotate(what + ": removing its commit marker"));
    tree = step.prefix;
  }
  At(at_point, kPointDeleteRenamed);
  // Step 4.
  return store.DeletePrefix(tree).Annotate(what + ": removing " + store.Describe(tree));
}

Status RemoveDeletingLeftovers(const orbax::Location& root) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, orbax::ListEntries(root));
  for (const ChildEntry& e : entries) {
    if (e.kind != ChildEntry::Kind::kPrefix || !IsDeletingName(e.name)) continue;
    CAIRN_RETURN_IF_ERROR(root.store->DeletePrefix(root.Key(e.name) + "/")
                              .Annotate("removing the interrupted deletion " + root.Child(e.name).Path()));
  }
  return Status::OK();
}

}  // namespace cairn::engine
