// The `_sharding` entry Orbax writes per jax.Array leaf: the facts of a
// jax sharding (handed over by the Python package, which reads them off the
// jax objects; or filled in by a C++ caller) formatted as the JSON text
// orbax-checkpoint writes and reads back (its
// `sharding_metadata.from_jax_sharding`):
//
//   NamedSharding:        {"sharding_type": "NamedSharding", "shape": [2, 4],
//                          "axis_names": ["data", "model"],
//                          "axis_types": ["AxisType.Auto", "AxisType.Auto"],
//                          "partition_spec": ["data", null, ["x", "y"]],
//                          "device_mesh": {"mesh": [[{"id": 0}, ...], ...]}}
//   SingleDeviceSharding: {"sharding_type": "SingleDeviceSharding",
//                          "device_str": "cpu:0"}
//
// The text is laid out as Python's json.dumps writes it (py_json.h).
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cairn/result.h"

namespace cairn::orbax {

// One entry of a PartitionSpec: None (replicated along that dimension), one
// mesh axis, or several mesh axes (a tuple in jax, a JSON list here).
struct PartitionSpecEntry {
  enum class Kind { kNone, kAxis, kAxes };
  Kind kind = Kind::kNone;
  std::vector<std::string> axes;  // kAxis: exactly one; kAxes: any number
};

struct ShardingMetadata {
  enum class Kind { kNamed, kSingleDevice };
  Kind kind = Kind::kNamed;
  // kNamed: the mesh and the partition spec.
  std::vector<int64_t> mesh_shape;
  std::vector<std::string> axis_names;  // one per mesh dimension
  // One per mesh dimension as jax prints them ("AxisType.Auto"); empty: all
  // "AxisType.Auto" (jax before axis types).
  std::vector<std::string> axis_types;
  std::vector<PartitionSpecEntry> partition_spec;
  std::vector<int64_t> device_ids;  // the mesh's device ids, row-major
  // kSingleDevice: "<platform>:<device id>", e.g. "cpu:0".
  std::string device_str;
};

// The JSON text of `_sharding`'s entry for `s`. InvalidArgument when the
// mesh's parts disagree (names, types or device ids not matching its shape,
// an axis entry without exactly one axis), naming `where` (the leaf).
Result<std::string> ShardingJson(const ShardingMetadata& s, const std::string& where);

}  // namespace cairn::orbax
