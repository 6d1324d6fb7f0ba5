#include "cairn/layout/orbax/sharding.h"

#include <cstddef>
#include <string>

#include "cairn/layout/orbax/py_json.h"

namespace cairn::orbax {
namespace {

std::string StringList(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + PyJsonString(v[i]);
  return out + "]";
}

std::string IntList(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The nested lists of {"id": n} over dimensions [dim, end) of the mesh,
// starting at device `*next`.
void DeviceMesh(const std::vector<int64_t>& shape, size_t dim, const std::vector<int64_t>& ids,
                size_t* next, std::string* out) {
  if (dim == shape.size()) {
    *out += "{\"id\": " + std::to_string(ids[(*next)++]) + "}";
    return;
  }
  *out += "[";
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i) *out += ", ";
    DeviceMesh(shape, dim + 1, ids, next, out);
  }
  *out += "]";
}

}  // namespace

Result<std::string> ShardingJson(const ShardingMetadata& s, const std::string& where) {
  if (s.kind == ShardingMetadata::Kind::kSingleDevice) {
    if (s.device_str.empty()) {
      return InvalidArgumentError("sharding of " + where + ": a SingleDeviceSharding needs its device");
    }
    return "{\"sharding_type\": \"SingleDeviceSharding\", \"device_str\": " + PyJsonString(s.device_str) + "}";
  }
  const size_t ndim = s.mesh_shape.size();
  auto bad = [&](const std::string& what) {
    return InvalidArgumentError("sharding of " + where + ": " + what + " (mesh shape " +
                                IntList(s.mesh_shape) + ")");
  };
  if (s.axis_names.size() != ndim) return bad(std::to_string(s.axis_names.size()) + " axis names");
  if (!s.axis_types.empty() && s.axis_types.size() != ndim) {
    return bad(std::to_string(s.axis_types.size()) + " axis types");
  }
  int64_t devices = 1;
  for (int64_t n : s.mesh_shape) {
    if (n < 0) return bad("a negative mesh dimension");
    devices *= n;
  }
  if (static_cast<int64_t>(s.device_ids.size()) != devices) {
    return bad(std::to_string(s.device_ids.size()) + " device ids");
  }
  std::vector<std::string> types = s.axis_types;
  if (types.empty()) types.assign(ndim, "AxisType.Auto");
  std::string spec = "[";
  for (size_t i = 0; i < s.partition_spec.size(); ++i) {
    const PartitionSpecEntry& e = s.partition_spec[i];
    if (i) spec += ", ";
    switch (e.kind) {
      case PartitionSpecEntry::Kind::kNone:
        spec += "null";
        break;
      case PartitionSpecEntry::Kind::kAxis:
        if (e.axes.size() != 1) return bad("partition spec entry " + std::to_string(i) + " names " +
                                           std::to_string(e.axes.size()) + " axes, not one");
        spec += PyJsonString(e.axes[0]);
        break;
      case PartitionSpecEntry::Kind::kAxes:
        spec += StringList(e.axes);
        break;
    }
  }
  spec += "]";
  std::string mesh;
  size_t next = 0;
  DeviceMesh(s.mesh_shape, 0, s.device_ids, &next, &mesh);
  return "{\"sharding_type\": \"NamedSharding\", \"shape\": " + IntList(s.mesh_shape) +
         ", \"axis_names\": " + StringList(s.axis_names) + ", \"axis_types\": " + StringList(types) +
         ", \"partition_spec\": " + spec + ", \"device_mesh\": {\"mesh\": " + mesh + "}}";
}

}  // namespace cairn::orbax
