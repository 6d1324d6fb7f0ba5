#include "cairn/api/leaves.h"

#include "cairn/engine/write_shape.h"

namespace cairn::api {
namespace {

orbax::ShardingMetadata ShardingOf(const ShardingFacts& f) {
  orbax::ShardingMetadata s;
  s.kind = f.kind == ShardingFacts::Kind::kSingleDevice ? orbax::ShardingMetadata::Kind::kSingleDevice
                                                        : orbax::ShardingMetadata::Kind::kNamed;
  s.mesh_shape = f.mesh_shape;
  s.axis_names = f.axis_names;
  s.axis_types = f.axis_types;
  s.device_ids = f.device_ids;
  s.device_str = f.device_str;
  for (const PartitionSpecEntry& p : f.partition_spec) {
    orbax::PartitionSpecEntry& e = s.partition_spec.emplace_back();
    e.kind = p.kind == PartitionSpecEntry::Kind::kAxis   ? orbax::PartitionSpecEntry::Kind::kAxis
             : p.kind == PartitionSpecEntry::Kind::kAxes ? orbax::PartitionSpecEntry::Kind::kAxes
                                                         : orbax::PartitionSpecEntry::Kind::kNone;
    e.axes = p.axes;
  }
  return s;
}

Status ConvertArray(const CheckpointArray& a, engine::SaveLeaf& leaf) {
  CAIRN_ASSIGN_OR_RETURN(leaf.path, KeyPathOf(a.path, a.key_kinds));
  leaf.value_type = a.value_type;
  const std::string where = "saving `" + orbax::ParamName(leaf.path) + "`";
  if (!a.dtype.empty()) {
    auto dtype = ParseDTypeName(a.dtype);
    if (!dtype.ok()) return dtype.status().Annotate(where);
    leaf.dtype = *dtype;
  } else if (orbax::IsArrayValueType(a.value_type)) {
    return InvalidArgumentError(where + ": the dtype is required");
  }
  leaf.shape = a.shape;
  leaf.write_shape = a.write_shape;
  leaf.num_replicas = a.num_replicas;
  if (a.layout_from) {
    std::vector<Box> device_boxes;
    for (const ArrayBox& b : a.layout_from->device_boxes) device_boxes.emplace_back(b.origin, b.shape);
    CAIRN_ASSIGN_OR_RETURN(engine::WriteLayout layout,
                           engine::WriteLayoutOf(leaf.value_type, leaf.shape, device_boxes,
                                                 a.layout_from->process_count,
                                                 "leaf " + orbax::KeyString(leaf.path)));
    leaf.write_shape = std::move(layout.write_shape);
    leaf.num_replicas = layout.num_replicas;
  }
  const int64_t item = static_cast<int64_t>(DTypeSize(leaf.dtype));
  for (const CheckpointShard& s : a.shards) {
    if (s.item_size != 0 && s.item_size != item) {
      return InvalidArgumentError("leaf " + orbax::KeyString(leaf.path) + ": shard item size " +
                                  std::to_string(s.item_size) + " differs from the dtype's");
    }
    leaf.shards.push_back({Box(s.origin, s.shape), s.data, s.byte_strides, s.replica_id, s.immutable});
  }
  leaf.random_key_impl = a.random_key_impl;
  if (a.sharding) leaf.sharding = ShardingOf(*a.sharding);
  leaf.string_value = a.string_value;
  return Status::OK();
}

}  // namespace

Result<orbax::KeyPath> KeyPathOf(const std::vector<std::string>& keys, const std::vector<PathKeyKind>& kinds) {
  if (!kinds.empty() && kinds.size() != keys.size()) {
    return InvalidArgumentError("a key path of " + std::to_string(keys.size()) + " keys has " +
                                std::to_string(kinds.size()) + " key kinds");
  }
  orbax::KeyPath path;
  for (size_t i = 0; i < keys.size(); ++i) {
    const PathKeyKind kind = kinds.empty() ? PathKeyKind::kDict : kinds[i];
    if (kind != PathKeyKind::kSequence && kind != PathKeyKind::kDict) {
      return InvalidArgumentError("key_type must be 1 or 2");
    }
    path.push_back({keys[i], static_cast<orbax::KeyType>(static_cast<int>(kind))});
  }
  return path;
}

Result<std::vector<engine::SaveLeaf>> SaveLeavesOf(const std::vector<CheckpointArray>& arrays) {
  std::vector<engine::SaveLeaf> out;
  out.reserve(arrays.size());
  for (const CheckpointArray& a : arrays) CAIRN_RETURN_IF_ERROR(ConvertArray(a, out.emplace_back()));
  return out;
}

Result<std::vector<engine::ArrayToRestore>> RestoreArraysOf(
    const std::vector<RestoreArray>& arrays, bool dtype_required,
    std::vector<std::vector<std::shared_ptr<MappedBytes>>>* mapped) {
  std::vector<engine::ArrayToRestore> out;
  out.reserve(arrays.size());
  if (mapped != nullptr) {
    mapped->assign(arrays.size(), {});
    for (size_t i = 0; i < arrays.size(); ++i) (*mapped)[i].resize(arrays[i].boxes.size());
  }
  for (const RestoreArray& a : arrays) {
    engine::ArrayToRestore& r = out.emplace_back();
    if (!a.param.empty()) {
      r.param = a.param;
    } else {
      CAIRN_ASSIGN_OR_RETURN(orbax::KeyPath path, KeyPathOf(a.path));
      r.param = orbax::ParamName(path);
    }
    if (a.dtype.empty()) {
      if (dtype_required) return InvalidArgumentError("restoring `" + r.param + "`: the dtype is required");
    } else {
      auto dtype = ParseDTypeName(a.dtype);
      if (!dtype.ok()) return dtype.status().Annotate("restoring `" + r.param + "`");
      r.dtype = *dtype;
    }
    for (const RestoreBox& b : a.boxes) {
      std::shared_ptr<MappedBytes>* slot = mapped != nullptr ? &(*mapped)[out.size() - 1][r.boxes.size()] : nullptr;
      r.boxes.push_back({Box(b.origin, b.shape), b.data, b.byte_strides, slot});
    }
    for (const ArrayBox& b : a.boxes_of_other_processes) r.boxes_of_other_processes.push_back(Box(b.origin, b.shape));
  }
  return out;
}

}  // namespace cairn::api
