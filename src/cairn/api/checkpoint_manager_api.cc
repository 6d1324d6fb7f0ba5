// include/cairn/checkpoint_manager.h over engine::CheckpointManager.
#include "cairn/checkpoint_manager.h"

#include "cairn/api/leaves.h"
#include "cairn/api/options.h"
#include "cairn/engine/checkpoint_manager.h"

namespace cairn {
namespace {

class PublicManager final : public CheckpointManager {
 public:
  explicit PublicManager(std::unique_ptr<engine::CheckpointManager> m) : m_(std::move(m)) {}

  bool ShouldSave(int64_t step) const override { return m_->ShouldSave(step); }
  Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force) override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::SaveLeaf> leaves, api::SaveLeavesOf(arrays));
    return m_->Save(step, std::move(leaves), force);
  }
  Status WaitUntilFinished() override { return m_->WaitUntilFinished(); }
  Result<std::vector<int64_t>> AllSteps() const override { return m_->AllSteps(); }
  Result<std::optional<int64_t>> LatestStep() const override { return m_->LatestStep(); }
  Status Restore(int64_t step, const std::vector<RestoreArray>& arrays) const override {
    CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, m_->StepLocation(step));
    return RestoreCheckpoint(loc.Path(), arrays);
  }
  Status Delete(int64_t step) override { return m_->Delete(step); }
  Status Close() override { return m_->Close(); }

 private:
  std::unique_ptr<engine::CheckpointManager> m_;
};

}  // namespace

Result<std::unique_ptr<CheckpointManager>> CheckpointManager::Open(const std::string& directory,
                                                                   const CheckpointManagerOptions& options,
                                                                   Coordinator& coordinator) {
  engine::ManagerOptions o;
  o.save_interval_steps = options.save_interval_steps;
  o.retention = {options.max_to_keep, options.keep_period};
  o.enable_async = options.enable_async;
  o.step_format = {options.step_prefix, options.step_format_fixed_length};
  CAIRN_ASSIGN_OR_RETURN(o.save, api::EngineSaveOptions(options.save));
  CAIRN_ASSIGN_OR_RETURN(orbax::Location root, orbax::OpenLocation(directory));
  CAIRN_ASSIGN_OR_RETURN(auto m, engine::CheckpointManager::Open(root, o, coordinator));
  return std::unique_ptr<CheckpointManager>(new PublicManager(std::move(m)));
}

}  // namespace cairn
