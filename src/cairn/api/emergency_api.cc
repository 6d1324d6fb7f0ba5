// include/cairn/emergency.h over the emergency manager (manager.h).
#include "cairn/emergency.h"

#include "cairn/api/leaves.h"
#include "cairn/api/options.h"
#include "cairn/emergency/manager.h"
#include "cairn/emergency/mpi_transport.h"

namespace cairn {
namespace {

class PublicEmergencyManager final : public EmergencyCheckpointManager {
 public:
  PublicEmergencyManager(std::shared_ptr<emergency::PeerTransport> transport,
                         std::unique_ptr<emergency::EmergencyCheckpointManager> native)
      : transport_(std::move(transport)), native_(std::move(native)) {}

  bool ShouldSave(int64_t step) const override { return native_->ShouldSave(step); }

  Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force) override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::SaveLeaf> leaves, api::SaveLeavesOf(arrays));
    return native_->Save(step, leaves, force);
  }

  Status WaitUntilFinished() override { return native_->WaitUntilFinished(); }
  Result<std::vector<int64_t>> AllSteps() override { return native_->AllSteps(); }
  Result<std::optional<int64_t>> LatestStep() override { return native_->LatestStep(); }

  Result<EmergencyRestoreReport> Restore(std::optional<int64_t> step,
                                         const std::vector<RestoreArray>& arrays) override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::ArrayToRestore> request,
                           api::RestoreArraysOf(arrays, /*dtype_required=*/true));
    CAIRN_ASSIGN_OR_RETURN(emergency::RestoreReport r, native_->RestoreStep(step, std::move(request)));
    EmergencyRestoreReport out;
    out.tier = r.tier == emergency::StepChoice::Tier::kLocal ? "local" : "persistent";
    out.step = r.step;
    out.bytes_from_own_disk = r.bytes_from_own_disk;
    out.bytes_from_peers = r.bytes_from_peers;
    out.bytes_from_persistent = r.bytes_from_persistent;
    out.log = std::move(r.log);
    return out;
  }

  Status Close() override { return native_->Close(); }

 private:
  std::shared_ptr<emergency::PeerTransport> transport_;
  std::unique_ptr<emergency::EmergencyCheckpointManager> native_;
};

}  // namespace

Result<std::unique_ptr<EmergencyCheckpointManager>> EmergencyCheckpointManager::Open(
    const EmergencyCheckpointOptions& options, Coordinator& coordinator) {
  emergency::EmergencyOptions o;
  o.local_directory = options.local_directory;
  o.persistent_directory = options.persistent_directory;
  o.num_replicas = options.num_replicas;
  o.peer_copies = options.peer_copies;
  o.local_save_interval_steps = options.local_save_interval_steps;
  o.local_max_to_keep = options.local_max_to_keep;
  o.persistent_save_interval_steps = options.persistent_save_interval_steps;
  o.persistent_max_to_keep = options.persistent_max_to_keep;
  CAIRN_ASSIGN_OR_RETURN(o.save, api::EngineSaveOptions(options.save));
  if (options.local_compression.empty()) {
    o.local_compression = std::nullopt;
  } else {
    auto local = api::ParseCompression(options.local_compression);
    if (!local.ok()) return local.status().Annotate("local_compression");
    o.local_compression = *local;
  }
  std::shared_ptr<emergency::PeerTransport> transport;
  if (options.use_mpi_transport) {
    CAIRN_ASSIGN_OR_RETURN(transport, emergency::NewMpiTransport());
  }
  CAIRN_ASSIGN_OR_RETURN(auto native, emergency::EmergencyCheckpointManager::Open(o, coordinator, transport));
  return std::unique_ptr<EmergencyCheckpointManager>(
      new PublicEmergencyManager(std::move(transport), std::move(native)));
}

Result<std::unique_ptr<EmergencyCheckpointManager>> OpenEmergencyCheckpointManager(
    const EmergencyCheckpointOptions& options, Coordinator& coordinator) {
  return EmergencyCheckpointManager::Open(options, coordinator);
}

}  // namespace cairn
