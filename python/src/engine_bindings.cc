// cairn._core engine functions: the native half of cairn.save /
// cairn.restore / cairn.save_async (python/cairn/orbax.py).
//
// One call each way. _engine_save takes the flattened tree (one tuple per
// leaf, shards as raw arrays of any strides with their index boxes and
// replica ids) and a Coordinator, and returns a _PendingSave once the
// shards are snapshotted (engine/save.h); _engine_restore fills the boxes
// each array needs (engine/restore.h). The GIL is released while the engine
// works.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cairn/api/options.h"
#include "cairn/coordinator.h"
#include "cairn/engine/colocated.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"
#include "cairn/engine/write_shape.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

using RawIn = nb::ndarray<nb::ro, nb::device::cpu>;
using RawOut = nb::ndarray<nb::device::cpu>;

// (origin, raw array, replica_id, immutable: the array never changes and
// the binding keeps it alive until the save is finished, as a jax.Array's
// host buffer)
using PyShard = std::tuple<std::vector<int64_t>, RawIn, int, bool>;
// (origin, shape)
using PyBox = std::pair<std::vector<int64_t>, std::vector<int64_t>>;
// (path [(key, key_type)], value_type, dtype name or "", shape, device boxes
//  of a jax.Array's sharding or None, process count, shards, random_key_impl
//  or None, sharding facts (a dict, see ConvertSharding) or None, string
//  value or None). The engine picks the write shape (engine/write_shape.h)
//  and formats `_sharding` (layout/orbax/sharding.h).
using PyLeaf = std::tuple<std::vector<std::pair<std::string, int>>, std::string, std::string,
                          std::vector<int64_t>, std::optional<std::vector<PyBox>>, int,
                          std::vector<PyShard>, std::optional<std::string>, nb::object,
                          std::optional<std::string>>;

std::vector<Index> ByteStrides(size_t ndim, const int64_t* strides, size_t itemsize) {
  std::vector<Index> out(ndim);
  for (size_t d = 0; d < ndim; ++d) out[d] = strides[d] * static_cast<Index>(itemsize);
  return out;
}

// The facts of a jax sharding (read off the jax objects in python/cairn): {"type":
// "NamedSharding", "mesh_shape", "axis_names", "axis_types",
// "partition_spec" (None, an axis name or a list of names per entry),
// "device_ids"} or {"type": "SingleDeviceSharding", "device_str"}.
orbax::ShardingMetadata ConvertSharding(nb::handle facts) {
  nb::dict d = nb::cast<nb::dict>(facts);
  orbax::ShardingMetadata s;
  const std::string type = nb::cast<std::string>(d["type"]);
  if (type == "SingleDeviceSharding") {
    s.kind = orbax::ShardingMetadata::Kind::kSingleDevice;
    s.device_str = nb::cast<std::string>(d["device_str"]);
    return s;
  }
  if (type != "NamedSharding") ThrowStatus(InvalidArgumentError("sharding type '" + type + "' is not written"));
  s.mesh_shape = nb::cast<std::vector<int64_t>>(d["mesh_shape"]);
  s.axis_names = nb::cast<std::vector<std::string>>(d["axis_names"]);
  s.axis_types = nb::cast<std::vector<std::string>>(d["axis_types"]);
  s.device_ids = nb::cast<std::vector<int64_t>>(d["device_ids"]);
  for (nb::handle p : nb::cast<nb::list>(d["partition_spec"])) {
    orbax::PartitionSpecEntry& e = s.partition_spec.emplace_back();
    if (p.is_none()) continue;
    if (nb::isinstance<nb::str>(p)) {
      e.kind = orbax::PartitionSpecEntry::Kind::kAxis;
      e.axes.push_back(nb::cast<std::string>(p));
    } else {
      e.kind = orbax::PartitionSpecEntry::Kind::kAxes;
      e.axes = nb::cast<std::vector<std::string>>(p);
    }
  }
  return s;
}

// `honor_immutable`: the caller keeps the arrays alive until the save is
// finished, so immutable shards need no snapshot (save_request.h).
engine::SaveLeaf ConvertLeaf(const PyLeaf& l, bool honor_immutable) {
  engine::SaveLeaf leaf;
  for (const auto& [key, type] : std::get<0>(l)) {
    if (type != 1 && type != 2) ThrowStatus(InvalidArgumentError("key_type must be 1 or 2"));
    leaf.path.push_back({key, static_cast<orbax::KeyType>(type)});
  }
  leaf.value_type = std::get<1>(l);
  if (!std::get<2>(l).empty()) leaf.dtype = ValueOrThrow(ParseDTypeName(std::get<2>(l)));
  leaf.shape = std::get<3>(l);
  const std::string where = "leaf " + orbax::KeyString(leaf.path);
  std::vector<Box> device_boxes;
  if (std::get<4>(l)) {
    for (const auto& [origin, shape] : *std::get<4>(l)) device_boxes.emplace_back(origin, shape);
  }
  engine::WriteLayout layout =
      ValueOrThrow(engine::WriteLayoutOf(leaf.value_type, leaf.shape, device_boxes, std::get<5>(l), where));
  leaf.write_shape = std::move(layout.write_shape);
  leaf.num_replicas = layout.num_replicas;
  const size_t item = DTypeSize(leaf.dtype);
  for (const auto& [origin, arr, replica, immutable] : std::get<6>(l)) {
    if (arr.itemsize() != item) {
      ThrowStatus(InvalidArgumentError("leaf " + orbax::KeyString(leaf.path) + ": shard item size " +
                                       std::to_string(arr.itemsize()) + " differs from the dtype's"));
    }
    engine::ShardToSave s;
    Shape shape(arr.ndim());
    for (size_t d = 0; d < arr.ndim(); ++d) shape[d] = static_cast<Index>(arr.shape(d));
    s.box = Box(origin, shape);
    s.data = arr.data();
    s.byte_strides = ByteStrides(arr.ndim(), arr.stride_ptr(), item);
    s.replica_id = replica;
    s.immutable = honor_immutable && immutable;
    leaf.shards.push_back(std::move(s));
  }
  leaf.random_key_impl = std::get<7>(l);
  if (!std::get<8>(l).is_none()) leaf.sharding = ConvertSharding(std::get<8>(l));
  if (std::get<9>(l)) leaf.string_value = *std::get<9>(l);
  return leaf;
}

// The front door's one parser (api/options.h).
engine::Compression ParseCompression(const std::string& c) { return ValueOrThrow(api::ParseCompression(c)); }

struct PyPendingSave {
  // The Python arrays immutable shards point into, dropped (GIL held) once
  // the save is finished. Declared before `pending`, whose destructor waits
  // for the save, so they outlive it.
  std::shared_ptr<void> keep;
  std::unique_ptr<engine::PendingSave> pending;

  void Wait() {
    Status s;
    {
      nb::gil_scoped_release release;
      s = pending->Wait();
    }
    keep.reset();
    ThrowIfError(s);
  }
};

// (param, dtype name or None, [(origin, writable raw array)])
using PyRestoreArray = std::tuple<std::string, std::optional<std::string>,
                                  std::vector<std::pair<std::vector<int64_t>, RawOut>>>;
// Per array: [(origin, shape)] of the boxes the other processes restore.
using PyOtherBoxes = std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>;

}  // namespace

ConvertedLeaves ConvertSaveLeaves(nb::handle leaves, bool honor_immutable) {
  auto keep = std::make_shared<std::vector<PyLeaf>>(nb::cast<std::vector<PyLeaf>>(leaves));
  ConvertedLeaves out;
  for (const PyLeaf& l : *keep) out.leaves.push_back(ConvertLeaf(l, honor_immutable));
  out.keep = std::move(keep);
  return out;
}

engine::Compression ConvertCompression(const std::string& name) { return ParseCompression(name); }

void RegisterEngine(nb::module_& m) {
  nb::class_<PyPendingSave>(m, "_PendingSave")
      .def("wait", &PyPendingSave::Wait,
           "Blocks until the checkpoint is committed; raises the save's error.")
      .def("done", [](const PyPendingSave& p) { return p.pending->done(); })
      .def_prop_ro("directory", [](const PyPendingSave& p) { return p.pending->directory(); });

  m.def(
      "_engine_save",
      [](const std::string& directory, const std::string& item_name, nb::handle leaves,
         Coordinator& coordinator, bool use_ocdbt, bool use_zarr3, bool replica_parallel,
         const std::string& compression, uint64_t memory_budget, uint64_t target_data_file_size,
         uint64_t chunk_byte_size, const std::string& custom_json, double timeout_s,
         bool caller_commits, bool shards_only, const std::string& process_name) {
        engine::SaveRequest r;
        r.directory = directory;
        r.item_name = item_name;
        r.caller_commits = caller_commits;
        r.options.shards_only = shards_only;
        r.options.process_name = process_name;
        ConvertedLeaves converted = ConvertSaveLeaves(leaves, /*honor_immutable=*/true);
        r.leaves = std::move(converted.leaves);
        r.options.use_ocdbt = use_ocdbt;
        r.options.use_zarr3 = use_zarr3;
        r.options.replica_parallel = replica_parallel;
        r.options.compression = ParseCompression(compression);
        r.options.memory_budget_bytes = memory_budget;
        r.options.target_data_file_size = target_data_file_size;
        r.options.chunk_byte_size = chunk_byte_size;
        r.options.custom_metadata = ValueOrThrow(ParseJson(custom_json, "custom_metadata"));
        r.options.timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::duration<double>(timeout_s));
        Result<std::unique_ptr<engine::PendingSave>> pending = InternalError("not started");
        {
          nb::gil_scoped_release release;
          pending = engine::StartSave(r, coordinator);
        }
        return PyPendingSave{std::move(converted.keep), ValueOrThrow(std::move(pending))};
      },
      nb::arg("directory"), nb::arg("item_name"), nb::arg("leaves"), nb::arg("coordinator"),
      nb::arg("use_ocdbt") = true, nb::arg("use_zarr3") = true, nb::arg("replica_parallel") = true,
      nb::arg("compression") = "default", nb::arg("memory_budget") = 0,
      nb::arg("target_data_file_size") = uint64_t{1} << 31, nb::arg("chunk_byte_size") = 0,
      nb::arg("custom_metadata") = "null", nb::arg("timeout_s") = 600.0,
      nb::arg("caller_commits") = false, nb::arg("shards_only") = false, nb::arg("process_name") = "",
      // The background work uses the coordinator until the save is done.
      nb::keep_alive<0, 4>());

  // The controller's last step of a Pathways colocated save
  // (engine/colocated.h): `leaves` is the whole tree (shards ignored).
  m.def(
      "_engine_finalize",
      [](const std::string& directory, nb::handle leaves, const std::vector<std::string>& process_names,
         bool use_ocdbt, bool use_zarr3, const std::string& custom_json) {
        engine::SaveRequest r;
        r.directory = directory;
        r.caller_commits = true;
        ConvertedLeaves converted = ConvertSaveLeaves(leaves, /*honor_immutable=*/false);
        r.leaves = std::move(converted.leaves);
        r.options.use_ocdbt = use_ocdbt;
        r.options.use_zarr3 = use_zarr3;
        r.options.custom_metadata = ValueOrThrow(ParseJson(custom_json, "custom_metadata"));
        Status s;
        {
          nb::gil_scoped_release release;
          s = engine::FinalizeColocatedSave(r, process_names);
        }
        ThrowIfError(s);
      },
      nb::arg("directory"), nb::arg("leaves"), nb::arg("process_names"), nb::arg("use_ocdbt") = true,
      nb::arg("use_zarr3") = true, nb::arg("custom_metadata") = "null");

  m.def(
      "_engine_restore",
      [](const std::string& directory, const std::string& item_name,
         const std::vector<PyRestoreArray>& arrays, const std::vector<PyOtherBoxes>& others,
         Coordinator* coordinator, nb::handle item) -> nb::object {
        if (!others.empty() && others.size() != arrays.size()) {
          throw nb::value_error("_engine_restore: boxes_of_other_processes needs one list per array");
        }
        engine::RestoreRequest r;
        r.directory = directory;
        r.item_name = item_name;
        r.item = OrbaxItemFromPython(item);
        for (const auto& [param, dtype, boxes] : arrays) {
          engine::ArrayToRestore a;
          a.param = param;
          if (dtype) a.dtype = ValueOrThrow(ParseDTypeName(*dtype));
          for (const auto& [origin, out] : boxes) {
            Shape shape(out.ndim());
            for (size_t d = 0; d < out.ndim(); ++d) shape[d] = static_cast<Index>(out.shape(d));
            a.boxes.push_back({Box(origin, shape), out.data(), ByteStrides(out.ndim(), out.stride_ptr(), out.itemsize())});
          }
          if (!others.empty()) {
            for (const auto& [origin, shape] : others[r.arrays.size()]) {
              a.boxes_of_other_processes.push_back(Box(origin, shape));
            }
          }
          r.arrays.push_back(std::move(a));
        }
        r.coordinator = coordinator;
        engine::RestoreStats stats;
        r.stats = &stats;
        Status s;
        {
          nb::gil_scoped_release release;
          s = engine::Restore(r);
        }
        ThrowIfError(s);
        nb::dict out;
        out["chunks_read"] = stats.chunks_read;
        out["host_share_rounds"] = stats.host_share_rounds;
        out["chunks_decoded_for_host"] = stats.chunks_decoded_for_host;
        out["chunks_from_host"] = stats.chunks_from_host;
        out["chunks_fallen_back"] = stats.chunks_fallen_back;
        return out;
      },
      nb::arg("directory"), nb::arg("item_name"), nb::arg("arrays"),
      nb::arg("boxes_of_other_processes") = std::vector<PyOtherBoxes>(),
      nb::arg("coordinator").none() = nb::none(), nb::arg("item").none() = nb::none());
}

}  // namespace cairn::python
