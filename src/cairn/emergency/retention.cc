// Implements retention.h; the deletion itself is engine::DeleteStep (the
// numbered protocol at the top of engine/step_retention.h).
#include "cairn/emergency/retention.h"

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

}  // namespace cairn::emergency
