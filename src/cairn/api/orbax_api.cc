// include/cairn/orbax.h over layout/orbax/ (item_store.h, step.h,
// metadata_files.h).
#include "cairn/orbax.h"

#include "cairn/api/item.h"
#include "cairn/dtype/dtype.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

class Item final : public CheckpointItem {
 public:
  explicit Item(std::shared_ptr<orbax::OrbaxItem> item) : item_(std::move(item)) {}

  const std::shared_ptr<orbax::OrbaxItem>& item() const { return item_; }

  const std::string& dir() const override { return item_->dir; }
  bool use_ocdbt() const override { return item_->use_ocdbt; }
  bool use_zarr3() const override { return item_->use_zarr3; }
  std::string variant() const override { return orbax::StorageVariantName(item_->variant()); }
  const std::map<std::string, std::string>& shardings() const override { return item_->shardings; }
  std::string custom_metadata_json() const override { return DumpJson(item_->metadata.custom_metadata); }
  std::map<std::string, std::string> random_key_impls() const override {
    std::map<std::string, std::string> out;
    for (const auto& [param, record] : item_->array_metadatas) {
      if (record.random_key_impl) out[param] = *record.random_key_impl;
    }
    return out;
  }

  Result<std::unique_ptr<ItemTreeNode>> Tree() const override {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<orbax::TreeNode> tree, orbax::BuildTree(item_->metadata));
    return NodeOf(*tree);
  }

  Result<std::vector<ItemArrayInfo>> ArrayInfo(const std::vector<std::string>& params) const override {
    std::vector<ItemArrayInfo> out;
    for (const std::string& param : params) {
      CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZarrArray> a, orbax::OpenItemArray(*item_, param));
      const ArrayMetadata& md = a->metadata();
      out.push_back({std::string(DTypeName(md.dtype)), md.shape, md.chunk_shape});
    }
    return out;
  }

  Status ReadArrays(const std::vector<WholeArrayOut>& outs) const override {
    for (const WholeArrayOut& out : outs) {
      CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZarrArray> a, orbax::OpenItemArray(*item_, out.param));
      const Shape& shape = a->shape();
      if (out.shape != shape || out.item_size != static_cast<int64_t>(DTypeSize(a->dtype()))) {
        return InvalidArgumentError("output buffer for `" + out.param + "` does not match the stored array");
      }
      CAIRN_RETURN_IF_ERROR(a->Read(Box(Shape(shape.size(), 0), shape), out.data)
                                .Annotate("reading `" + out.param + "` of " + item_->dir));
    }
    return Status::OK();
  }

 private:
  Result<std::unique_ptr<ItemTreeNode>> NodeOf(const orbax::TreeNode& node) const {
    auto out = std::make_unique<ItemTreeNode>();
    switch (node.kind) {
      case orbax::TreeNode::Kind::kLeaf: {
        out->kind = ItemTreeNode::Kind::kLeaf;
        const std::string& vt = node.leaf->value.value_type;
        const std::string param = orbax::ParamName(node.leaf->path);
        if (vt == orbax::kString) {
          auto it = item_->strings.find(param);
          if (it == item_->strings.end()) {
            return NotFoundError("string `" + param + "` missing from _strings.json of " + item_->dir);
          }
          out->leaf_kind = "string";
          out->string_value = it->second;
        } else if (vt == orbax::kNone) {
          out->leaf_kind = "none";
        } else if (orbax::IsArrayValueType(vt)) {
          out->leaf_kind = "array";
          out->param = param;
          out->value_type = vt;
        } else {
          out->leaf_kind = "unknown";
          out->value_type = vt;
        }
        return out;
      }
      case orbax::TreeNode::Kind::kList:
      case orbax::TreeNode::Kind::kDict:
        out->kind = node.kind == orbax::TreeNode::Kind::kList ? ItemTreeNode::Kind::kList
                                                               : ItemTreeNode::Kind::kDict;
        for (const auto& [name, child] : node.children) {
          CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ItemTreeNode> c, NodeOf(*child));
          out->children.emplace_back(name, std::move(c));
        }
        return out;
    }
    return out;
  }

  std::shared_ptr<orbax::OrbaxItem> item_;
};

PendingOrbaxCommit PublicCommit(const orbax::PendingCommit& p) { return {p.location.Path(), p.save_id}; }

}  // namespace

namespace api {

std::shared_ptr<const orbax::OrbaxItem> OrbaxItemOf(const std::shared_ptr<const CheckpointItem>& item) {
  if (item == nullptr) return nullptr;
  return static_cast<const Item&>(*item).item();  // OpenCheckpointItem makes every one
}

}  // namespace api

Result<std::shared_ptr<const CheckpointItem>> OpenCheckpointItem(const std::string& path,
                                                                 const std::string& item_name) {
  CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, orbax::OpenLocation(path));
  CAIRN_ASSIGN_OR_RETURN(orbax::Location dir, orbax::ResolveItemLocation(loc, item_name));
  CAIRN_ASSIGN_OR_RETURN(orbax::OrbaxItem item, orbax::OpenItem(dir));
  return std::shared_ptr<const CheckpointItem>(
      std::make_shared<Item>(std::make_shared<orbax::OrbaxItem>(std::move(item))));
}

Result<PendingOrbaxCommit> BeginOrbaxCommit(const std::string& final_path, const std::string& save_id) {
  CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, orbax::OpenLocation(final_path));
  CAIRN_ASSIGN_OR_RETURN(orbax::PendingCommit p,
                         orbax::BeginCommit(loc, save_id.empty() ? orbax::NewSaveId() : save_id));
  return PublicCommit(p);
}

Result<std::string> OrbaxPendingPath(const std::string& final_path, const std::string& save_id) {
  CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, orbax::OpenLocation(final_path));
  return orbax::PendingCommitFor(loc, save_id).location.Path();
}

Result<PendingOrbaxCommit> FindOrbaxPendingCommit(const std::string& final_path) {
  CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, orbax::OpenLocation(final_path));
  CAIRN_ASSIGN_OR_RETURN(orbax::PendingCommit p, orbax::FindPendingCommit(loc));
  return PublicCommit(p);
}

Status FinishOrbaxCommit(const std::string& final_path, const std::string& save_id) {
  CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, orbax::OpenLocation(final_path));
  return orbax::FinishCommit(orbax::PendingCommitFor(loc, save_id));
}

void AbandonOrbaxCommit(const std::string& final_path, const std::string& save_id) {
  auto loc = orbax::OpenLocation(final_path);
  if (loc.ok()) orbax::AbandonCommit(orbax::PendingCommitFor(*loc, save_id));
}

Status WriteOrbaxCheckpointMetadata(const std::string& dir, const std::string& handler,
                                    const std::vector<std::string>& items, int64_t init_timestamp_nsecs,
                                    const std::string& custom_metadata_json) {
  orbax::CheckpointMetadata md;
  if (items.empty()) {
    md.item_handlers = handler;
  } else {
    std::map<std::string, std::string> m;
    for (const std::string& i : items) m[i] = handler;
    md.item_handlers = std::move(m);
  }
  md.init_timestamp_nsecs = init_timestamp_nsecs;
  md.commit_timestamp_nsecs = orbax::NowNanos();
  CAIRN_ASSIGN_OR_RETURN(md.custom_metadata, ParseJson(custom_metadata_json, "custom_metadata"));
  CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, orbax::OpenLocation(dir));
  return orbax::WriteSmallFile(loc, orbax::kCheckpointMetadataFile, orbax::EmitCheckpointMetadata(md));
}

Result<std::vector<OrbaxStep>> ListOrbaxSteps(const std::string& root) {
  CAIRN_ASSIGN_OR_RETURN(orbax::Location loc, orbax::OpenLocation(root));
  CAIRN_ASSIGN_OR_RETURN(std::vector<orbax::StepInfo> steps, orbax::DiscoverSteps(loc));
  std::vector<OrbaxStep> out;
  for (const orbax::StepInfo& s : steps) out.push_back({s.step, s.path()});
  return out;
}

std::string OrbaxStepName(int64_t step, const std::string& prefix, std::optional<int> fixed_length) {
  return orbax::StepName(step, {prefix, fixed_length});
}

int64_t OrbaxNowNanos() { return orbax::NowNanos(); }

}  // namespace cairn
