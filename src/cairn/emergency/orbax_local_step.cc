#include "cairn/emergency/orbax_local_step.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/metadata_files.h"

namespace cairn::emergency {
namespace {

constexpr std::string_view kGlobalProcessMetadata = "global_process_metadata.json";
constexpr size_t kMaxDevices = size_t{1} << 20;
constexpr size_t kMaxMeshRank = 16;

// The leaves of a nested list of {"id": n} objects, in row-major order, as
// long as the nesting matches `dims`.
Status FlattenDeviceMesh(const Json& j, const std::vector<int64_t>& dims, size_t level,
                         std::vector<int64_t>& out, const std::string& what) {
  if (level == dims.size()) {
    if (!j.is_object()) return InvalidArgumentError(what + ": a mesh device is not an object");
    CAIRN_ASSIGN_OR_RETURN(int64_t id, GetIntField(j, "id"));
    out.push_back(id);
    return Status::OK();
  }
  if (!j.is_array() || static_cast<int64_t>(j.size()) != dims[level]) {
    return InvalidArgumentError(what + ": the device mesh does not have the mesh's shape");
  }
  for (const Json& e : j) CAIRN_RETURN_IF_ERROR(FlattenDeviceMesh(e, dims, level + 1, out, what));
  return Status::OK();
}

}  // namespace

Result<std::vector<Box>> BoxesOfDevices(std::string_view sharding, const Shape& shape,
                                        const std::vector<int64_t>& device_ids, const std::string& what) {
  CAIRN_ASSIGN_OR_RETURN(Json j, ParseJson(sharding, what));
  if (!j.is_object()) return InvalidArgumentError(what + ": the sharding is not an object");
  CAIRN_ASSIGN_OR_RETURN(std::string type, GetStringField(j, "sharding_type"));
  std::vector<Box> boxes;
  if (type == "SingleDeviceSharding") {
    CAIRN_ASSIGN_OR_RETURN(std::string device, GetStringField(j, "device_str"));
    const size_t colon = device.rfind(':');
    int64_t id = -1;
    if (colon != std::string::npos) std::from_chars(device.data() + colon + 1, device.data() + device.size(), id);
    if (std::find(device_ids.begin(), device_ids.end(), id) != device_ids.end()) boxes.push_back(Box::FromShape(shape));
    return boxes;
  }
  if (type != "NamedSharding") {
    return InvalidArgumentError(what + ": sharding type `" + type + "` is not one cairn can place");
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* mesh_shape_json, GetField(j, "shape"));
  CAIRN_ASSIGN_OR_RETURN(std::vector<int64_t> mesh_shape, JsonToIntVector(*mesh_shape_json, what + " mesh shape"));
  CAIRN_ASSIGN_OR_RETURN(const Json* names_json, GetField(j, "axis_names"));
  if (mesh_shape.empty() || mesh_shape.size() > kMaxMeshRank || !names_json->is_array() ||
      names_json->size() != mesh_shape.size()) {
    return InvalidArgumentError(what + ": the mesh's shape and axis names disagree");
  }
  size_t devices = 1;
  for (int64_t n : mesh_shape) {
    if (n < 1 || devices * static_cast<size_t>(n) > kMaxDevices) {
      return InvalidArgumentError(what + ": mesh shape out of range");
    }
    devices *= static_cast<size_t>(n);
  }
  std::map<std::string, size_t> axis;
  for (size_t a = 0; a < names_json->size(); ++a) {
    CAIRN_ASSIGN_OR_RETURN(std::string name, JsonToString((*names_json)[a], what + " axis name"));
    axis[name] = a;
  }
  // For each array dimension, the mesh axes it is split over.
  CAIRN_ASSIGN_OR_RETURN(const Json* spec, GetField(j, "partition_spec"));
  if (!spec->is_array() || spec->size() > shape.size()) {
    return InvalidArgumentError(what + ": the partition spec has more entries than the array has dimensions");
  }
  std::vector<std::vector<size_t>> split(shape.size());
  for (size_t d = 0; d < spec->size(); ++d) {
    const Json& e = (*spec)[d];
    std::vector<std::string> names;
    if (e.is_string()) {
      names.push_back(e.get<std::string>());
    } else if (e.is_array()) {
      for (const Json& n : e) {
        CAIRN_ASSIGN_OR_RETURN(std::string name, JsonToString(n, what + " partition spec"));
        names.push_back(name);
      }
    } else if (!e.is_null()) {
      return InvalidArgumentError(what + ": a partition spec entry is neither null, a name nor a list of names");
    }
    for (const std::string& n : names) {
      auto it = axis.find(n);
      if (it == axis.end()) return InvalidArgumentError(what + ": partition spec names unknown mesh axis `" + n + "`");
      split[d].push_back(it->second);
    }
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* device_mesh, GetField(j, "device_mesh"));
  if (!device_mesh->is_object()) return InvalidArgumentError(what + ": `device_mesh` is not an object");
  CAIRN_ASSIGN_OR_RETURN(const Json* mesh, GetField(*device_mesh, "mesh"));
  std::vector<int64_t> ids;
  ids.reserve(devices);
  CAIRN_RETURN_IF_ERROR(FlattenDeviceMesh(*mesh, mesh_shape, 0, ids, what));
  for (int64_t id : device_ids) {
    auto pos = std::find(ids.begin(), ids.end(), id);
    if (pos == ids.end()) continue;  // a device outside this array's mesh holds none of it
    // The device's coordinates in the mesh.
    size_t flat = static_cast<size_t>(pos - ids.begin());
    std::vector<int64_t> coord(mesh_shape.size());
    for (size_t a = mesh_shape.size(); a-- > 0;) {
      coord[a] = static_cast<int64_t>(flat % static_cast<size_t>(mesh_shape[a]));
      flat /= static_cast<size_t>(mesh_shape[a]);
    }
    Box box = Box::FromShape(shape);
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t ways = 1, index = 0;
      for (size_t a : split[d]) {
        index = index * mesh_shape[a] + coord[a];
        ways *= mesh_shape[a];
      }
      const int64_t block = (shape[d] + ways - 1) / ways;
      box.origin[d] = std::min(shape[d], index * block);
      box.shape[d] = std::min(block, shape[d] - box.origin[d]);
    }
    if (!box.empty() && std::find(boxes.begin(), boxes.end(), box) == boxes.end()) boxes.push_back(std::move(box));
  }
  return boxes;
}

Result<LocalStepRecord> RecordFromOrbaxLocalStep(const orbax::Location& step_dir, int64_t step) {
  const orbax::Location pm = step_dir.Child(kProcessMetadataItem);
  const std::string pm_what = pm.Path() + "/" + std::string(kGlobalProcessMetadata);
  auto text = orbax::ReadSmallFile(pm, kGlobalProcessMetadata);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFoundError(step_dir.Path() + " is not an Orbax local step: no " + pm_what);
    }
    return text.status();
  }
  CAIRN_ASSIGN_OR_RETURN(Json per_process, ParseJson(*text, pm_what));
  if (!per_process.is_array() || per_process.empty() || per_process.size() > kMaxDevices) {
    return InvalidArgumentError(pm_what + ": not a list of every process's device ids");
  }
  LocalStepRecord r;
  r.step = step;
  r.process_count = static_cast<int>(per_process.size());
  // The owner: the one process whose database the state item holds.
  const orbax::Location state = step_dir.Child(kStateItem);
  auto entries = orbax::ListEntries(state);
  if (!entries.ok()) {
    if (entries.status().code() == StatusCode::kNotFound) {
      return NotFoundError(step_dir.Path() + " is not an Orbax local step: no `state` item");
    }
    return entries.status();
  }
  std::vector<int> owners;
  const std::string_view prefix = orbax::kProcessSubdirPrefix;
  for (const ChildEntry& e : *entries) {
    if (e.kind != ChildEntry::Kind::kPrefix || e.name.rfind(prefix, 0) != 0) continue;
    int p = -1;
    const char* first = e.name.data() + prefix.size();
    const char* last = e.name.data() + e.name.size();
    auto [end, ec] = std::from_chars(first, last, p);
    if (ec != std::errc() || end != last || first == last) continue;
    owners.push_back(p);
  }
  if (owners.empty()) return NotFoundError(state.Path() + " holds no per-process database (ocdbt.process_<i>)");
  if (owners.size() > 1) {
    return InvalidArgumentError(state.Path() + " holds the databases of " + std::to_string(owners.size()) +
                                " processes; a local step holds only its owner's");
  }
  r.process_index = owners.front();
  if (r.process_index < 0 || r.process_index >= r.process_count) {
    return InvalidArgumentError(state.Path() + ": owner process " + std::to_string(r.process_index) +
                                " is not among the " + std::to_string(r.process_count) + " processes of " + pm_what);
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<int64_t> device_ids,
                         JsonToIntVector(per_process[r.process_index], pm_what + " entry of the owner"));
  CAIRN_ASSIGN_OR_RETURN(orbax::OrbaxItem item, orbax::OpenItem(state));
  r.num_replicas = 0;
  for (const orbax::TreeEntry& e : item.metadata.entries) {
    if (!orbax::IsArrayValueType(e.value.value_type)) continue;
    const std::string param = orbax::ParamName(e.path);
    const std::string where = state.Path() + " array `" + param + "`";
    CAIRN_ASSIGN_OR_RETURN(auto array, orbax::OpenItemArray(item, param));
    StoredArray& a = r.arrays[param];
    a.dtype = std::string(DTypeName(array->dtype()));
    a.shape = array->shape();
    auto sharding = item.shardings.find(param);
    if (sharding == item.shardings.end()) {
      if (e.value.value_type == "jax.Array") return InvalidArgumentError(where + ": no entry in `_sharding`");
      a.boxes.push_back(Box::FromShape(a.shape));  // a host array: every process writes it whole
      continue;
    }
    CAIRN_ASSIGN_OR_RETURN(a.boxes, BoxesOfDevices(sharding->second, a.shape, device_ids, where + " sharding"));
    if (r.num_replicas == 0) {
      // The mesh's first axis, Orbax's default replica axis.
      auto j = ParseJson(sharding->second, where);
      const Json* shape = j.ok() && j->is_object() ? FindField(*j, "shape") : nullptr;
      auto dims = shape ? JsonToIntVector(*shape, where) : Result<std::vector<int64_t>>(std::vector<int64_t>{});
      if (dims.ok() && !dims->empty() && (*dims)[0] > 0 && r.process_count % (*dims)[0] == 0) {
        r.num_replicas = static_cast<int>((*dims)[0]);
      }
    }
  }
  if (r.num_replicas == 0) r.num_replicas = 1;
  return r;
}

}  // namespace cairn::emergency
