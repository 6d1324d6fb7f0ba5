// include/cairn/checkpoint_manager.h over engine::CheckpointManager.
#include "cairn/checkpoint_manager.h"

#include "cairn/api/leaves.h"
#include "cairn/api/options.h"
#include "cairn/engine/checkpoint_manager.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

class PublicManager final : public CheckpointManager {
 public:
  explicit PublicManager(std::unique_ptr<engine::CheckpointManager> m) : m_(std::move(m)) {}

  bool ShouldSave(int64_t step) const override { return m_->ShouldSave(step); }
  Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force,
                    const StepSaveOptions& step_options) override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::SaveLeaf> leaves, api::SaveLeavesOf(arrays));
    engine::StepExtras extras{step_options.extra_files, step_options.extra_item_handlers,
                              step_options.item_name, step_options.score, Json()};
    CAIRN_ASSIGN_OR_RETURN(extras.custom_metadata, ParseJson(step_options.custom_metadata_json, "custom_metadata"));
    extras.progress = step_options.progress;
    return m_->Save(step, std::move(leaves), force, std::move(extras));
  }
  Status WaitUntilFinished() override { return m_->WaitUntilFinished(); }
  Result<std::vector<int64_t>> AllSteps() const override { return m_->AllSteps(); }
  Result<std::optional<int64_t>> LatestStep() const override { return m_->LatestStep(); }
  std::optional<int64_t> PendingStep() const override { return m_->PendingStep(); }
  Result<std::string> StepPath(int64_t step) const override {
    CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, m_->StepLocation(step));
    return loc.Path();
  }
  std::string directory() const override { return m_->root().Path(); }
  Status Reload() override { return m_->Reload(); }
  void SetScores(std::map<int64_t, double> scores) override { m_->SetScores(std::move(scores)); }
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
  o.retention = {options.max_to_keep, options.keep_period, options.retention_by_score, options.higher_is_better,
                 options.keep_unscored};
  o.enable_async = options.enable_async;
  o.step_format = {options.step_prefix, options.step_format_fixed_length};
  o.item_name = options.item_name;
  CAIRN_ASSIGN_OR_RETURN(o.save, api::EngineSaveOptions(options.save));
  engine::ManagerHooks hooks;
  hooks.at_point = options.at_point;
  CAIRN_ASSIGN_OR_RETURN(orbax::Location root, orbax::OpenLocation(directory));
  CAIRN_ASSIGN_OR_RETURN(auto m, engine::CheckpointManager::Open(root, o, coordinator, std::move(hooks)));
  return std::unique_ptr<CheckpointManager>(new PublicManager(std::move(m)));
}

}  // namespace cairn
