// Implements retention.h; the deletion itself is engine::DeleteStep (the
// numbered protocol at the top of engine/step_retention.h).
#include "cairn/emergency/retention.h"

#include <string>

#include "cairn/events.h"
#include "cairn/emergency/dir_transfer.h"
#include "cairn/emergency/local_step.h"
#include "cairn/engine/step_retention.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::emergency {
namespace {

// The owners' directories of `<local>/peer_copies/` (none when it is absent).
std::vector<orbax::Location> PeerCopyRoots(const orbax::Location& local) {
  std::vector<orbax::Location> out;
  const orbax::Location copies = local.Child(kPeerCopiesDir);
  auto owners = orbax::ListEntries(copies);
  if (!owners.ok()) return out;
  for (const ChildEntry& e : *owners) {
    if (e.kind == ChildEntry::Kind::kPrefix) out.push_back(copies.Child(e.name));
  }
  return out;
}

Status RemoveUnder(const orbax::Location& root) {
  if (!orbax::Exists(root)) return Status::OK();
  return engine::RemoveDeletingLeftovers(root);
}

}  // namespace

Status KeepNewestSteps(const orbax::Location& root, int keep, const std::function<void(std::string_view)>& at_point) {
  if (keep <= 0) return Status::OK();
  // Step 1.
  auto steps = orbax::ListSteps(root, orbax::StepNameFormat{});
  if (!steps.ok()) return steps.status().code() == StatusCode::kNotFound ? Status::OK() : steps.status();
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps->size(); ++i) {
    // Step 2.
    Status s = engine::DeleteStep((*steps)[i].location, at_point);
    if (s.code() == StatusCode::kNotFound) continue;  // gone meanwhile
    CAIRN_RETURN_IF_ERROR(s.Annotate("removing old step " + (*steps)[i].path()));
    EmitEvent(EventLevel::kInfo, "deleted " + (*steps)[i].path() + " (retention: keeping the newest " +
                                     std::to_string(keep) + ")");
  }
  return Status::OK();
}

Status RemoveInterruptedDeletions(const orbax::Location& local, const orbax::Location* persistent) {
  Status status = RemoveUnder(local);
  for (const orbax::Location& owner : PeerCopyRoots(local)) {
    Status s = RemoveUnder(owner);
    if (status.ok()) status = s;
  }
  if (persistent == nullptr) return status;
  Status s = RemoveUnder(*persistent);
  return status.ok() ? s : status;
}

Status RemoveUnfinishedReceipts(const orbax::Location& dir, int64_t up_to_step) {
  auto entries = orbax::ListEntries(dir);
  if (!entries.ok()) return entries.status().code() == StatusCode::kNotFound ? Status::OK() : entries.status();
  Status first;
  for (const ChildEntry& e : *entries) {
    const size_t dot = e.name.find('.');
    if (e.kind != ChildEntry::Kind::kPrefix || dot == 0 || dot == std::string::npos) continue;
    const std::string step_name = e.name.substr(0, dot);
    if (step_name.find_first_not_of("0123456789") != std::string::npos || step_name.size() > 18) continue;
    const orbax::PendingCommit pending = orbax::PendingCommitFor(dir.Child(step_name), kReceiptSaveId);
    if (pending.location.Name() != e.name || std::stoll(step_name) > up_to_step) continue;
    Status s = pending.location.store->DeletePrefix(pending.location.prefix)
                   .Annotate("removing the unfinished receipt " + pending.location.Path());
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace cairn::emergency
