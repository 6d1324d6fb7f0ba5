// include/cairn/checkpoint_manager.h over engine::CheckpointManager.
#include "cairn/checkpoint_manager.h"

#include "cairn/engine/checkpoint_manager.h"

namespace cairn {
namespace {

Result<engine::Compression> CompressionOf(const std::string& name) {
  if (name == "default") return engine::Compression::kOrbaxDefault;
  if (name == "none") return engine::Compression::kNone;
  if (name == "auto") return engine::Compression::kAuto;
  return InvalidArgumentError("compression `" + name + "` is not one of default, none, auto");
}

Result<std::vector<engine::SaveLeaf>> LeavesOf(const std::vector<CheckpointArray>& arrays) {
  std::vector<engine::SaveLeaf> out;
  for (const CheckpointArray& a : arrays) {
    engine::SaveLeaf& leaf = out.emplace_back();
    for (const std::string& k : a.path) leaf.path.push_back({k, orbax::KeyType::kDict});
    CAIRN_ASSIGN_OR_RETURN(leaf.dtype, ParseDTypeName(a.dtype));
    leaf.shape = a.shape;
    leaf.write_shape = a.write_shape;
    leaf.num_replicas = a.num_replicas;
    for (const CheckpointShard& s : a.shards) leaf.shards.push_back({Box(s.origin, s.shape), s.data, {}, s.replica_id});
  }
  return out;
}

class PublicManager final : public CheckpointManager {
 public:
  explicit PublicManager(std::unique_ptr<engine::CheckpointManager> m) : m_(std::move(m)) {}

  bool ShouldSave(int64_t step) const override { return m_->ShouldSave(step); }
  Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force) override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<engine::SaveLeaf> leaves, LeavesOf(arrays));
    return m_->Save(step, std::move(leaves), force);
  }
  Status WaitUntilFinished() override { return m_->WaitUntilFinished(); }
  std::vector<int64_t> AllSteps() const override { return m_->AllSteps(); }
  std::optional<int64_t> LatestStep() const override { return m_->LatestStep(); }
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
  o.save.use_ocdbt = options.save.use_ocdbt;
  o.save.use_zarr3 = options.save.use_zarr3;
  o.save.replica_parallel = options.save.replica_parallel;
  CAIRN_ASSIGN_OR_RETURN(o.save.compression, CompressionOf(options.save.compression));
  o.save.memory_budget_bytes = options.save.memory_budget_bytes;
  o.save.timeout = options.save.timeout;
  CAIRN_ASSIGN_OR_RETURN(orbax::Location root, orbax::OpenLocation(directory));
  CAIRN_ASSIGN_OR_RETURN(auto m, engine::CheckpointManager::Open(root, o, coordinator));
  return std::unique_ptr<CheckpointManager>(new PublicManager(std::move(m)));
}

}  // namespace cairn
