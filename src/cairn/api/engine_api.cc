// include/cairn/engine.h over the engine's own request types.
#include "cairn/engine.h"

#include "cairn/api/leaves.h"
#include "cairn/api/options.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"

namespace cairn {
namespace {

class PublicSave final : public CheckpointSave {
 public:
  explicit PublicSave(std::unique_ptr<engine::PendingSave> save) : save_(std::move(save)) {}
  Status Wait() override { return save_->Wait(); }
  bool done() const override { return save_->done(); }

 private:
  std::unique_ptr<engine::PendingSave> save_;
};

}  // namespace

Result<std::unique_ptr<CheckpointSave>> StartSaveCheckpoint(
    const std::string& directory, const std::vector<CheckpointArray>& arrays,
    const SaveCheckpointOptions& options, Coordinator& coordinator) {
  engine::SaveRequest r;
  r.directory = directory;
  CAIRN_ASSIGN_OR_RETURN(r.options, api::EngineSaveOptions(options));
  CAIRN_ASSIGN_OR_RETURN(r.leaves, api::SaveLeavesOf(arrays));
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

Status RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays) {
  return RestoreCheckpoint(directory, arrays, nullptr);
}

Status RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays,
                         Coordinator* coordinator) {
  engine::RestoreRequest r;
  r.directory = directory;
  r.coordinator = coordinator;
  CAIRN_ASSIGN_OR_RETURN(r.arrays, api::RestoreArraysOf(arrays, /*dtype_required=*/false));
  return engine::Restore(r);
}

}  // namespace cairn
