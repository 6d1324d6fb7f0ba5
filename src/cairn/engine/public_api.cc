// include/cairn/engine.h over the engine's own request types.
#include "cairn/engine.h"

#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"
#include "cairn/layout/orbax/tree_metadata.h"

namespace cairn {
namespace {

orbax::KeyPath KeyPathOf(const std::vector<std::string>& keys) {
  orbax::KeyPath path;
  for (const std::string& k : keys) path.push_back({k, orbax::KeyType::kDict});
  return path;
}

Result<engine::Compression> CompressionOf(const std::string& name) {
  if (name == "default") return engine::Compression::kOrbaxDefault;
  if (name == "none") return engine::Compression::kNone;
  if (name == "auto") return engine::Compression::kAuto;
  return Status(StatusCode::kInvalidArgument,
                "compression `" + name + "` is not one of default, none, auto");
}

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
  r.options.use_ocdbt = options.use_ocdbt;
  r.options.use_zarr3 = options.use_zarr3;
  r.options.replica_parallel = options.replica_parallel;
  CAIRN_ASSIGN_OR_RETURN(r.options.compression, CompressionOf(options.compression));
  r.options.memory_budget_bytes = options.memory_budget_bytes;
  r.options.timeout = options.timeout;
  for (const CheckpointArray& a : arrays) {
    engine::SaveLeaf leaf;
    leaf.path = KeyPathOf(a.path);
    CAIRN_ASSIGN_OR_RETURN(leaf.dtype, ParseDTypeName(a.dtype));
    leaf.shape = a.shape;
    leaf.write_shape = a.write_shape;
    leaf.num_replicas = a.num_replicas;
    for (const CheckpointShard& s : a.shards) {
      leaf.shards.push_back({Box(s.origin, s.shape), s.data, {}, s.replica_id, s.immutable});
    }
    r.leaves.push_back(std::move(leaf));
  }
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
  for (const RestoreArray& a : arrays) {
    engine::ArrayToRestore out;
    out.param = orbax::ParamName(KeyPathOf(a.path));
    if (!a.dtype.empty()) {
      CAIRN_ASSIGN_OR_RETURN(DType d, ParseDTypeName(a.dtype));
      out.dtype = d;
    }
    for (const RestoreBox& b : a.boxes) out.boxes.push_back({Box(b.origin, b.shape), b.data, {}});
    r.arrays.push_back(std::move(out));
  }
  return engine::Restore(r);
}

}  // namespace cairn
