// cairn._core engine functions: the native half of cairn.save /
// cairn.restore / cairn.save_async (python/cairn/orbax.py).
//
// One call each way. _engine_save takes the flattened tree (one tuple per
// leaf, shards as raw arrays of any strides with their index boxes and
// replica ids) and a Coordinator, and returns a _PendingSave once the
// shards are snapshotted; _engine_restore fills the boxes each array needs
// (include/cairn/engine.h). The GIL is released while the library works.
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
#include "interruptible.h"
#include "cairn/coordinator.h"
#include "cairn/engine.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

using RawIn = nb::ndarray<nb::ro, nb::device::cpu>;

// (origin, raw array, replica_id, immutable: the array never changes and
// the binding keeps it alive until the save is finished, as a jax.Array's
// host buffer)
using PyShard = std::tuple<std::vector<int64_t>, RawIn, int, bool>;
// (origin, shape)
using PyBox = std::pair<std::vector<int64_t>, std::vector<int64_t>>;
// (path [(key, key_type)], value_type, dtype name or "", shape, device boxes
//  of a jax.Array's sharding or None, process count, shards, random_key_impl
//  or None, sharding facts (a dict, see ConvertSharding) or None, string
//  value or None). The library picks the write shape from the boxes or the
//  process count (CheckpointArray::layout_from) and formats `_sharding`.
using PyLeaf = std::tuple<std::vector<std::pair<std::string, int>>, std::string, std::string,
                          std::vector<int64_t>, std::optional<std::vector<PyBox>>, int,
                          std::vector<PyShard>, std::optional<std::string>, nb::object,
                          std::optional<std::string>>;

std::vector<int64_t> ByteStrides(size_t ndim, const int64_t* strides, size_t itemsize) {
  std::vector<int64_t> out(ndim);
  for (size_t d = 0; d < ndim; ++d) out[d] = strides[d] * static_cast<int64_t>(itemsize);
  return out;
}

template <typename Array>
std::vector<int64_t> ShapeOf(const Array& a) {
  std::vector<int64_t> shape(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) shape[d] = static_cast<int64_t>(a.shape(d));
  return shape;
}

// The facts of a jax sharding (read off the jax objects in python/cairn): {"type":
// "NamedSharding", "mesh_shape", "axis_names", "axis_types",
// "partition_spec" (None, an axis name or a list of names per entry),
// "device_ids"} or {"type": "SingleDeviceSharding", "device_str"}.
ShardingFacts ConvertSharding(nb::handle facts) {
  nb::dict d = nb::cast<nb::dict>(facts);
  ShardingFacts s;
  const std::string type = nb::cast<std::string>(d["type"]);
  if (type == "SingleDeviceSharding") {
    s.kind = ShardingFacts::Kind::kSingleDevice;
    s.device_str = nb::cast<std::string>(d["device_str"]);
    return s;
  }
  if (type != "NamedSharding") ThrowStatus(InvalidArgumentError("sharding type '" + type + "' is not written"));
  s.mesh_shape = nb::cast<std::vector<int64_t>>(d["mesh_shape"]);
  s.axis_names = nb::cast<std::vector<std::string>>(d["axis_names"]);
  s.axis_types = nb::cast<std::vector<std::string>>(d["axis_types"]);
  s.device_ids = nb::cast<std::vector<int64_t>>(d["device_ids"]);
  for (nb::handle p : nb::cast<nb::list>(d["partition_spec"])) {
    PartitionSpecEntry& e = s.partition_spec.emplace_back();
    if (p.is_none()) continue;
    if (nb::isinstance<nb::str>(p)) {
      e.kind = PartitionSpecEntry::Kind::kAxis;
      e.axes.push_back(nb::cast<std::string>(p));
    } else {
      e.kind = PartitionSpecEntry::Kind::kAxes;
      e.axes = nb::cast<std::vector<std::string>>(p);
    }
  }
  return s;
}

CheckpointArray ConvertLeaf(const PyLeaf& l) {
  CheckpointArray a;
  for (const auto& [key, type] : std::get<0>(l)) {
    a.path.push_back(key);
    a.key_kinds.push_back(static_cast<PathKeyKind>(type));
  }
  a.value_type = std::get<1>(l);
  a.dtype = std::get<2>(l);
  a.shape = std::get<3>(l);
  ShardingLayout& layout = a.layout_from.emplace();
  if (std::get<4>(l)) {
    for (const auto& [origin, shape] : *std::get<4>(l)) layout.device_boxes.push_back({origin, shape});
  }
  layout.process_count = std::get<5>(l);
  for (const auto& [origin, arr, replica, immutable] : std::get<6>(l)) {
    CheckpointShard& s = a.shards.emplace_back();
    s.origin = origin;
    s.shape = ShapeOf(arr);
    s.data = arr.data();
    s.replica_id = replica;
    s.immutable = immutable;
    s.byte_strides = ByteStrides(arr.ndim(), arr.stride_ptr(), arr.itemsize());
    s.item_size = static_cast<int64_t>(arr.itemsize());
  }
  a.random_key_impl = std::get<7>(l);
  if (!std::get<8>(l).is_none()) a.sharding = ConvertSharding(std::get<8>(l));
  if (std::get<9>(l)) a.string_value = *std::get<9>(l);
  return a;
}

SaveCheckpointOptions SaveOptions(bool use_ocdbt, bool use_zarr3, const std::string& custom_json) {
  SaveCheckpointOptions o;
  o.use_ocdbt = use_ocdbt;
  o.use_zarr3 = use_zarr3;
  o.custom_metadata_json = custom_json;
  return o;
}

struct PyPendingSave {
  // The Python arrays immutable shards point into, dropped (GIL held) once
  // the save is finished. Declared before `pending`, whose destructor waits
  // for the save, so they outlive it.
  std::shared_ptr<void> keep;
  // Requested by Ctrl-C during wait(): the save stops before its commit.
  std::unique_ptr<Interrupt> interrupt;
  std::unique_ptr<CheckpointSave> pending;

  PyPendingSave(std::shared_ptr<void> keep_, std::unique_ptr<Interrupt> interrupt_,
                std::unique_ptr<CheckpointSave> pending_)
      : keep(std::move(keep_)), interrupt(std::move(interrupt_)), pending(std::move(pending_)) {}
  PyPendingSave(PyPendingSave&&) = default;
  PyPendingSave& operator=(PyPendingSave&&) = default;
  // Dropped unfinished (the handle lost, or an exception before wait()):
  // waits for the save with the GIL released, since its threads call the
  // progress callback, which takes the GIL.
  ~PyPendingSave() {
    if (pending == nullptr) return;
    nb::gil_scoped_release release;
    pending.reset();
  }

  void Wait() {
    Status s = RunInterruptibly(*interrupt, [&] { return pending->Wait(); });
    keep.reset();
    ThrowIfError(s);
  }

  // Stops the save at its next chunk, before its commit (wait() then
  // raises KeyboardInterrupt's Cancelled status).
  void Cancel() { interrupt->Request(); }
};

// Per array: [(origin, shape)] of the boxes the other processes restore.
using PyOtherBoxes = std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>;

}  // namespace

ConvertedLeaves ConvertSaveLeaves(nb::handle leaves) {
  auto keep = std::make_shared<std::vector<PyLeaf>>(nb::cast<std::vector<PyLeaf>>(leaves));
  ConvertedLeaves out;
  for (const PyLeaf& l : *keep) out.arrays.push_back(ConvertLeaf(l));
  out.keep = std::move(keep);
  return out;
}

std::vector<RestoreArray> ConvertRestoreArrays(const std::vector<PyRestoreArray>& arrays) {
  std::vector<RestoreArray> out;
  for (const auto& [param, dtype, boxes] : arrays) {
    RestoreArray& a = out.emplace_back();
    a.param = param;
    if (dtype) a.dtype = *dtype;
    for (const auto& [origin, box] : boxes) {
      a.boxes.push_back({origin, ShapeOf(box), box.data(), ByteStrides(box.ndim(), box.stride_ptr(), box.itemsize())});
    }
  }
  return out;
}

std::chrono::nanoseconds Seconds(double seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds));
}

SaveCheckpointOptions StorageOptions(bool use_ocdbt, bool use_zarr3, bool replica_parallel,
                                     const std::string& compression, uint64_t memory_budget,
                                     uint64_t target_data_file_size, uint64_t chunk_byte_size,
                                     double timeout_s) {
  SaveCheckpointOptions o;
  o.use_ocdbt = use_ocdbt;
  o.use_zarr3 = use_zarr3;
  o.replica_parallel = replica_parallel;
  o.compression = compression;
  o.memory_budget_bytes = memory_budget;
  o.target_data_file_size = target_data_file_size;
  o.chunk_byte_size = chunk_byte_size;
  o.timeout = Seconds(timeout_s);
  return o;
}

void RegisterEngine(nb::module_& m) {
  nb::class_<PyPendingSave>(m, "_PendingSave")
      .def("wait", &PyPendingSave::Wait,
           "Blocks until the checkpoint is committed; raises the save's error.")
      .def("cancel", &PyPendingSave::Cancel,
           "Stops the save before its commit; wait() then raises KeyboardInterrupt.")
      .def("done", [](const PyPendingSave& p) { return p.pending->done(); })
      .def_prop_ro("directory", [](const PyPendingSave& p) { return p.pending->directory(); });

  m.def(
      "_engine_save",
      [](const std::string& directory, const std::string& item_name, nb::handle leaves,
         Coordinator& coordinator, bool use_ocdbt, bool use_zarr3, bool replica_parallel,
         const std::string& compression, uint64_t memory_budget, uint64_t target_data_file_size,
         uint64_t chunk_byte_size, const std::string& custom_json, double timeout_s,
         bool caller_commits, bool shards_only, const std::string& process_name, nb::object progress) {
        ConvertedLeaves converted = ConvertSaveLeaves(leaves);
        SaveCheckpointOptions o =
            StorageOptions(use_ocdbt, use_zarr3, replica_parallel, compression, memory_budget,
                           target_data_file_size, chunk_byte_size, timeout_s);
        o.custom_metadata_json = custom_json;
        o.progress = ProgressObserver(std::move(progress), "cairn.save progress callback");
        SaveCheckpointTarget target{item_name, caller_commits, shards_only, process_name};
        auto interrupt = std::make_unique<Interrupt>();
        o.interrupt = interrupt.get();
        // Starting copies the numpy arrays (within the budget, so while
        // chunks are written): Ctrl-C stops that too.
        std::unique_ptr<CheckpointSave> started;
        try {
          ThrowIfError(RunInterruptibly(*interrupt, [&]() -> Status {
            auto pending = StartSaveCheckpoint(directory, converted.arrays, o, coordinator, target);
            if (!pending.ok()) return pending.status();
            started = std::move(*pending);
            return Status::OK();
          }));
        } catch (...) {
          if (started != nullptr) {  // its threads may call `progress`: wait without the GIL
            nb::gil_scoped_release release;
            started.reset();
          }
          throw;
        }
        return PyPendingSave(std::move(converted.keep), std::move(interrupt), std::move(started));
      },
      nb::arg("directory"), nb::arg("item_name"), nb::arg("leaves"), nb::arg("coordinator"),
      nb::arg("use_ocdbt") = true, nb::arg("use_zarr3") = true, nb::arg("replica_parallel") = true,
      nb::arg("compression") = "default", nb::arg("memory_budget") = 0,
      nb::arg("target_data_file_size") = uint64_t{1} << 31, nb::arg("chunk_byte_size") = 0,
      nb::arg("custom_metadata") = "null", nb::arg("timeout_s") = 600.0,
      nb::arg("caller_commits") = false, nb::arg("shards_only") = false, nb::arg("process_name") = "",
      nb::arg("progress").none() = nb::none(),
      // The background work uses the coordinator until the save is done.
      nb::keep_alive<0, 4>());

  // The controller's last step of a Pathways colocated save
  // (FinalizeColocatedSave): `leaves` is the whole tree (shards ignored).
  m.def(
      "_engine_finalize",
      [](const std::string& directory, nb::handle leaves, const std::vector<std::string>& process_names,
         bool use_ocdbt, bool use_zarr3, const std::string& custom_json) {
        ConvertedLeaves converted = ConvertSaveLeaves(leaves);
        const SaveCheckpointOptions o = SaveOptions(use_ocdbt, use_zarr3, custom_json);
        Status s;
        {
          nb::gil_scoped_release release;
          s = FinalizeColocatedSave(directory, converted.arrays, o, process_names);
        }
        ThrowIfError(s);
      },
      nb::arg("directory"), nb::arg("leaves"), nb::arg("process_names"), nb::arg("use_ocdbt") = true,
      nb::arg("use_zarr3") = true, nb::arg("custom_metadata") = "null");

  m.def(
      "_engine_restore",
      [](const std::string& directory, const std::string& item_name, const std::vector<PyRestoreArray>& arrays,
         const std::vector<PyOtherBoxes>& others, Coordinator* coordinator, nb::handle item,
         nb::object progress) -> nb::object {
        std::vector<RestoreArray> request = ConvertRestoreArrays(arrays);
        if (!others.empty() && others.size() != request.size()) {
          throw nb::value_error("_engine_restore: boxes_of_other_processes needs one list per array");
        }
        for (size_t i = 0; i < others.size(); ++i) {
          for (const auto& [origin, shape] : others[i]) request[i].boxes_of_other_processes.push_back({origin, shape});
        }
        RestoreOptions o;
        o.item_name = item_name;
        o.item = OrbaxItemFromPython(item);
        o.coordinator = coordinator;
        o.progress = ProgressObserver(std::move(progress), "cairn.restore progress callback");
        Result<RestoreStats> stats = RunInterruptibly([&](const Interrupt* interrupt) {
          o.interrupt = interrupt;
          return RestoreCheckpoint(directory, request, o);
        });
        const RestoreStats& s = ValueOrThrow(std::move(stats));
        nb::dict out;
        out["chunks_read"] = s.chunks_read;
        out["host_share_rounds"] = s.host_share_rounds;
        out["chunks_decoded_for_host"] = s.chunks_decoded_for_host;
        out["chunks_from_host"] = s.chunks_from_host;
        out["chunks_fallen_back"] = s.chunks_fallen_back;
        return out;
      },
      nb::arg("directory"), nb::arg("item_name"), nb::arg("arrays"),
      nb::arg("boxes_of_other_processes") = std::vector<PyOtherBoxes>(),
      nb::arg("coordinator").none() = nb::none(), nb::arg("item").none() = nb::none(),
      nb::arg("progress").none() = nb::none());
}

}  // namespace cairn::python
