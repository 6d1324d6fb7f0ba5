// include/cairn/engine.h over the engine's own request types.
#include "cairn/engine.h"

#include "cairn/api/item.h"
#include "cairn/api/leaves.h"
#include "cairn/api/options.h"
#include "cairn/engine/colocated.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"

namespace cairn {
namespace {

class PublicSave final : public CheckpointSave {
 public:
  explicit PublicSave(std::unique_ptr<engine::PendingSave> save) : save_(std::move(save)) {}
  Status Wait() override { return save_->Wait(); }
  bool done() const override { return save_->done(); }
  const std::string& directory() const override { return save_->directory(); }

 private:
  std::unique_ptr<engine::PendingSave> save_;
};

}  // namespace

Result<std::unique_ptr<CheckpointSave>> StartSaveCheckpoint(
    const std::string& directory, const std::vector<CheckpointArray>& arrays,
    const SaveCheckpointOptions& options, Coordinator& coordinator, const SaveCheckpointTarget& target) {
  engine::SaveRequest r;
  r.directory = directory;
  r.item_name = target.item_name;
  r.caller_commits = target.caller_commits;
  CAIRN_ASSIGN_OR_RETURN(r.leaves, api::SaveLeavesOf(arrays));
  CAIRN_ASSIGN_OR_RETURN(r.options, api::EngineSaveOptions(options));
  r.options.shards_only = target.shards_only;
  r.options.process_name = target.process_name;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<engine::PendingSave> save,
                         engine::StartSave(r, coordinator));
  return std::unique_ptr<CheckpointSave>(new PublicSave(std::move(save)));
}

Status SaveCheckpoint(const std::string& directory, const std::vector<CheckpointArray>& arrays,
                      const SaveCheckpointOptions& options, Coordinator& coordinator) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointSave> save,
                         StartSaveCheckpoint(directory, arrays, options, coordinator));
  return save->Wait();
}

Status FinalizeColocatedSave(const std::string& directory, const std::vector<CheckpointArray>& arrays,
                             const SaveCheckpointOptions& options,
                             const std::vector<std::string>& process_names) {
  engine::SaveRequest r;
  r.directory = directory;
  r.caller_commits = true;
  CAIRN_ASSIGN_OR_RETURN(r.leaves, api::SaveLeavesOf(arrays));
  CAIRN_ASSIGN_OR_RETURN(r.options, api::EngineSaveOptions(options));
  return engine::FinalizeColocatedSave(r, process_names);
}

Status RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays) {
  return RestoreCheckpoint(directory, arrays, nullptr);
}

Status RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays,
                         Coordinator* coordinator) {
  RestoreOptions options;
  options.coordinator = coordinator;
  return RestoreCheckpoint(directory, arrays, options).status();
}

Result<RestoreStats> RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays,
                                       const RestoreOptions& options) {
  engine::RestoreRequest r;
  r.directory = directory;
  r.item_name = options.item_name;
  r.item = api::OrbaxItemOf(options.item);
  r.coordinator = options.coordinator;
  r.progress = options.progress;
  r.interrupt = options.interrupt;
  CAIRN_ASSIGN_OR_RETURN(r.arrays, api::RestoreArraysOf(arrays, /*dtype_required=*/false));
  engine::RestoreStats stats;
  r.stats = &stats;
  CAIRN_RETURN_IF_ERROR(engine::Restore(r));
  RestoreStats out;
  out.chunks_read = stats.chunks_read;
  out.host_share_rounds = stats.host_share_rounds;
  out.chunks_decoded_for_host = stats.chunks_decoded_for_host;
  out.chunks_from_host = stats.chunks_from_host;
  out.chunks_fallen_back = stats.chunks_fallen_back;
  return out;
}

}  // namespace cairn
