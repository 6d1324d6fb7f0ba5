// include/cairn/emergency.h over the emergency manager (manager.h) and the
// transport choice (transport_choice.h).
#include "cairn/emergency.h"

#include "cairn/api/leaves.h"
#include "cairn/api/options.h"
#include "cairn/emergency/manager.h"
#include "cairn/emergency/transport_choice.h"
#include "cairn/emergency/zmq_transport.h"

namespace cairn {
namespace {

const char* TierName(emergency::StepChoice::Tier t) {
  switch (t) {
    case emergency::StepChoice::Tier::kLocal: return "local";
    case emergency::StepChoice::Tier::kPersistent: return "persistent";
    case emergency::StepChoice::Tier::kNone: return "none";
  }
  return "none";
}

EmergencyRestoreReport PublicReport(emergency::RestoreReport r) {
  EmergencyRestoreReport out;
  out.tier = TierName(r.tier);
  out.step = r.step;
  out.bytes_from_own_disk = r.bytes_from_own_disk;
  out.bytes_from_peers = r.bytes_from_peers;
  out.bytes_from_persistent = r.bytes_from_persistent;
  out.bytes_fetched = r.bytes_fetched;
  out.bytes_mapped = r.bytes_mapped;
  out.log = std::move(r.log);
  return out;
}

class PublicEmergencyManager final : public EmergencyCheckpointManager {
 public:
  PublicEmergencyManager(std::shared_ptr<emergency::PeerTransport> transport,
                         std::unique_ptr<emergency::EmergencyCheckpointManager> native)
      : transport_(std::move(transport)), native_(std::move(native)) {}

  bool ShouldSave(int64_t step) const override { return native_->ShouldSave(step); }
  bool ShouldSaveLocal(int64_t step) const override { return native_->ShouldSaveLocal(step); }
  bool ShouldSavePersistent(int64_t step) const override { return native_->ShouldSavePersistent(step); }

  Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force,
                    std::shared_ptr<void> hold) override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::SaveLeaf> leaves, api::SaveLeavesOf(arrays));
    return native_->Save(step, leaves, force, std::move(hold));
  }

  Status WaitUntilFinished() override { return native_->WaitUntilFinished(); }
  Result<std::vector<int64_t>> AllSteps() override { return native_->AllSteps(); }
  Result<std::optional<int64_t>> LatestStep() override { return native_->LatestStep(); }

  Result<EmergencyRestoreReport> Restore(std::optional<int64_t> step,
                                         const std::vector<RestoreArray>& arrays) override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::ArrayToRestore> request,
                           api::RestoreArraysOf(arrays, /*dtype_required=*/true));
    CAIRN_ASSIGN_OR_RETURN(emergency::RestoreReport r, native_->RestoreStep(step, std::move(request)));
    return PublicReport(std::move(r));
  }

  Result<EmergencyRestorePlan> PrepareRestore(std::optional<int64_t> step) override {
    CAIRN_ASSIGN_OR_RETURN(prepared_, native_->PrepareRestore(step));
    const emergency::PreparedRestore& p = *prepared_;
    return EmergencyRestorePlan{TierName(p.choice.tier), p.choice.step, p.metadata_item, p.log};
  }

  Result<EmergencyRestoreReport> RestorePrepared(const std::vector<RestoreArray>& arrays, bool map_boxes) override {
    if (!prepared_) return FailedPreconditionError("restore before prepare_restore");
    std::vector<std::vector<std::shared_ptr<MappedBytes>>> slots;
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::ArrayToRestore> request,
                           api::RestoreArraysOf(arrays, /*dtype_required=*/false, map_boxes ? &slots : nullptr));
    CAIRN_ASSIGN_OR_RETURN(emergency::RestoreReport r, native_->Restore(*prepared_, std::move(request)));
    prepared_.reset();
    EmergencyRestoreReport out = PublicReport(std::move(r));
    for (size_t ai = 0; ai < slots.size(); ++ai) {
      for (size_t bi = 0; bi < slots[ai].size(); ++bi) {
        std::shared_ptr<MappedBytes>& m = slots[ai][bi];
        if (m == nullptr) continue;
        const size_t size = m->size();
        uint8_t* data = m->data();
        out.mapped.push_back({ai, bi, std::shared_ptr<uint8_t>(std::move(m), data), size});
      }
    }
    return out;
  }

  Status Close() override { return native_->Close(); }

 private:
  std::shared_ptr<emergency::PeerTransport> transport_;
  std::unique_ptr<emergency::EmergencyCheckpointManager> native_;
  std::optional<emergency::PreparedRestore> prepared_;  // by PrepareRestore, for RestorePrepared
};

}  // namespace

bool ZmqTransportAvailable() { return emergency::ZmqTransportAvailable(); }

Result<std::unique_ptr<EmergencyCheckpointManager>> EmergencyCheckpointManager::Open(
    const EmergencyCheckpointOptions& options, Coordinator& coordinator) {
  emergency::EmergencyOptions o;
  o.at_point = options.at_point;
  o.local_directory = options.local_directory;
  o.persistent_directory = options.persistent_directory;
  o.num_replicas = options.num_replicas;
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
  o.global_process_metadata_json = options.global_process_metadata_json;
  o.mesh_metadata_json = options.mesh_metadata_json;
  CAIRN_ASSIGN_OR_RETURN(
      emergency::TransportChoice choice,
      emergency::ChooseTransport(options.transport, options.peer_copies, options.num_replicas,
                                 emergency::DetectTransportEnvironment(coordinator)));
  o.peer_copies = choice.peer_copies;
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<emergency::PeerTransport> transport,
                         emergency::OpenTransport(choice.kind, coordinator, options.zmq_host, o.save.timeout));
  CAIRN_ASSIGN_OR_RETURN(auto native, emergency::EmergencyCheckpointManager::Open(o, coordinator, transport));
  return std::unique_ptr<EmergencyCheckpointManager>(
      new PublicEmergencyManager(std::move(transport), std::move(native)));
}

Result<std::unique_ptr<EmergencyCheckpointManager>> OpenEmergencyCheckpointManager(
    const EmergencyCheckpointOptions& options, Coordinator& coordinator) {
  return EmergencyCheckpointManager::Open(options, coordinator);
}

}  // namespace cairn
