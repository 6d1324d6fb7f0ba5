#include "cairn/api/leaves.h"

namespace cairn::api {
namespace {

std::string Joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ".") + k;
  return out;
}

}  // namespace

orbax::KeyPath KeyPathOf(const std::vector<std::string>& keys) {
  orbax::KeyPath path;
  for (const std::string& k : keys) path.push_back({k, orbax::KeyType::kDict});
  return path;
}

Result<std::vector<engine::SaveLeaf>> SaveLeavesOf(const std::vector<CheckpointArray>& arrays) {
  std::vector<engine::SaveLeaf> out;
  out.reserve(arrays.size());
  for (const CheckpointArray& a : arrays) {
    engine::SaveLeaf& leaf = out.emplace_back();
    leaf.path = KeyPathOf(a.path);
    auto dtype = ParseDTypeName(a.dtype);
    if (!dtype.ok()) return dtype.status().Annotate("saving `" + Joined(a.path) + "`");
    leaf.dtype = *dtype;
    leaf.shape = a.shape;
    leaf.write_shape = a.write_shape;
    leaf.num_replicas = a.num_replicas;
    for (const CheckpointShard& s : a.shards) {
      leaf.shards.push_back({Box(s.origin, s.shape), s.data, {}, s.replica_id, s.immutable});
    }
  }
  return out;
}

Result<std::vector<engine::ArrayToRestore>> RestoreArraysOf(const std::vector<RestoreArray>& arrays,
                                                            bool dtype_required) {
  std::vector<engine::ArrayToRestore> out;
  out.reserve(arrays.size());
  for (const RestoreArray& a : arrays) {
    engine::ArrayToRestore& r = out.emplace_back();
    r.param = orbax::ParamName(KeyPathOf(a.path));
    if (a.dtype.empty()) {
      if (dtype_required) return InvalidArgumentError("restoring `" + r.param + "`: the dtype is required");
    } else {
      auto dtype = ParseDTypeName(a.dtype);
      if (!dtype.ok()) return dtype.status().Annotate("restoring `" + r.param + "`");
      r.dtype = *dtype;
    }
    for (const RestoreBox& b : a.boxes) r.boxes.push_back({Box(b.origin, b.shape), b.data, {}});
  }
  return out;
}

}  // namespace cairn::api
