// cairn._core._EmergencyManager: the native half of
// cairn.emergency.CheckpointManager (python/cairn/emergency.py) over
// include/cairn/emergency.h. Python flattens the tree (as cairn.save
// does) and builds the restore boxes; everything else happens here, with the
// GIL released while the manager works (its collectives may call Python
// through a callback coordinator).
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
#include "cairn/coordinator.h"
#include "cairn/emergency.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

template <typename F>
auto Released(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

struct PyEmergencyManager {
  std::unique_ptr<EmergencyCheckpointManager> native;

  explicit PyEmergencyManager(std::unique_ptr<EmergencyCheckpointManager> n) : native(std::move(n)) {}
  PyEmergencyManager(PyEmergencyManager&&) = default;
  PyEmergencyManager& operator=(PyEmergencyManager&&) = default;
  // The background thread may take the GIL to drop a save's arrays
  // (HoldArrays): wait for it without the GIL.
  ~PyEmergencyManager() {
    if (native == nullptr) return;
    nb::gil_scoped_release release;
    native.reset();
  }

  EmergencyCheckpointManager& get() {
    if (!native) ThrowStatus(FailedPreconditionError("the emergency CheckpointManager is closed"));
    return *native;
  }
};

// Owns the Python arrays a save's immutable shards point into; the manager
// drops it on its background thread once both tiers' writes have read them,
// taking the GIL to release the references (not once the interpreter is
// shutting down: the arrays are then left alone).
std::shared_ptr<void> HoldArrays(std::shared_ptr<void> keep) {
  return std::shared_ptr<void>(new std::shared_ptr<void>(std::move(keep)), [](void* p) {
    auto* kept = static_cast<std::shared_ptr<void>*>(p);
    if (!nb::is_alive()) return;
    nb::gil_scoped_acquire gil;
    delete kept;
  });
}

}  // namespace

void RegisterEmergency(nb::module_& m) {
  nb::class_<PyEmergencyManager>(m, "_EmergencyManager")
      .def("should_save", [](PyEmergencyManager& s, int64_t step) { return s.get().ShouldSave(step); })
      .def("should_save_local", [](PyEmergencyManager& s, int64_t step) { return s.get().ShouldSaveLocal(step); })
      .def("should_save_persistent",
           [](PyEmergencyManager& s, int64_t step) { return s.get().ShouldSavePersistent(step); })
      .def("save",
           [](PyEmergencyManager& s, int64_t step, nb::handle leaves, bool force) {
             // A jax.Array's shards are read in the background, not copied
             // first (they never change); the manager holds them until then.
             ConvertedLeaves converted = ConvertSaveLeaves(leaves);
             EmergencyCheckpointManager& native = s.get();
             std::shared_ptr<void> hold = HoldArrays(std::move(converted.keep));
             Result<bool> saved =
                 Released([&] { return native.Save(step, converted.arrays, force, std::move(hold)); });
             return ValueOrThrow(std::move(saved));
           },
           nb::arg("step"), nb::arg("leaves"), nb::arg("force") = false)
      .def("wait_until_finished",
           [](PyEmergencyManager& s) {
             EmergencyCheckpointManager& native = s.get();
             ThrowIfError(Released([&] { return native.WaitUntilFinished(); }));
           })
      .def("all_steps",
           [](PyEmergencyManager& s) {
             EmergencyCheckpointManager& native = s.get();
             return ValueOrThrow(Released([&] { return native.AllSteps(); }));
           })
      .def("latest_step",
           [](PyEmergencyManager& s) {
             EmergencyCheckpointManager& native = s.get();
             return ValueOrThrow(Released([&] { return native.LatestStep(); }));
           })
      .def("prepare_restore",
           [](PyEmergencyManager& s, std::optional<int64_t> step) {
             EmergencyCheckpointManager& native = s.get();
             EmergencyRestorePlan p = ValueOrThrow(Released([&] { return native.PrepareRestore(step); }));
             return std::make_tuple(p.tier, p.step, p.metadata_item, p.log);
           },
           nb::arg("step").none())
      .def("restore",
           [](PyEmergencyManager& s, const std::vector<PyRestoreArray>& arrays, bool map_boxes) {
             std::vector<RestoreArray> request = ConvertRestoreArrays(arrays);
             EmergencyCheckpointManager& native = s.get();
             EmergencyRestoreReport report =
                 ValueOrThrow(Released([&] { return native.RestorePrepared(request, map_boxes); }));
             nb::dict d;
             d["tier"] = report.tier;
             d["step"] = report.step;
             d["bytes_from_own_disk"] = report.bytes_from_own_disk;
             d["bytes_from_peers"] = report.bytes_from_peers;
             d["bytes_fetched"] = report.bytes_fetched;
             d["bytes_from_persistent"] = report.bytes_from_persistent;
             d["bytes_mapped"] = report.bytes_mapped;
             d["log"] = report.log;
             // [(array index, box index, uint8 array over the mapping)]: the
             // array keeps the mapping alive.
             nb::list mapped;
             for (MappedBox& m : report.mapped) {
               auto* hold = new std::shared_ptr<uint8_t>(std::move(m.data));
               nb::capsule owner(hold, [](void* p) noexcept { delete static_cast<std::shared_ptr<uint8_t>*>(p); });
               nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>> view(hold->get(), {m.size}, owner);
               mapped.append(nb::make_tuple(m.array_index, m.box_index, view));
             }
             d["mapped"] = mapped;
             return d;
           },
           nb::arg("arrays"), nb::arg("map_boxes") = false)
      .def("close", [](PyEmergencyManager& s) {
        if (!s.native) return;
        Status st = Released([&] { return s.native->Close(); });
        s.native.reset();
        ThrowIfError(st);
      });

  m.def("_emergency_zmq_available", [] { return ZmqTransportAvailable(); });
  m.def(
      "_emergency_open",
      [](const std::string& local_directory, const std::string& persistent_directory, Coordinator& coordinator,
         const std::string& transport, int num_replicas, std::optional<int> peer_copies, int64_t local_interval,
         int local_max_to_keep, int64_t persistent_interval, int persistent_max_to_keep, bool use_ocdbt,
         bool use_zarr3, const std::string& compression, uint64_t memory_budget, double timeout_s,
         const std::string& global_process_metadata, const std::string& mesh_metadata,
         const std::string& zmq_host, const std::string& local_compression, nb::object at_point,
         bool replica_parallel, uint64_t chunk_byte_size, uint64_t target_data_file_size) {
        EmergencyCheckpointOptions o;
        // An observer of the named points of saves, transfers and retention,
        // called with (point, step); crash tests kill from it.
        if (!at_point.is_none()) {
          o.at_point = [held = HoldCallable(std::move(at_point))](std::string_view point, int64_t step) {
            CallObserver(held, "cairn.emergency.CheckpointManager at_point callback", nb::str(point.data(), point.size()),
                         step);
          };
        }
        o.local_directory = local_directory;
        o.persistent_directory = persistent_directory;
        o.transport = transport;
        o.num_replicas = num_replicas;
        o.peer_copies = peer_copies;
        o.zmq_host = zmq_host;
        o.local_save_interval_steps = local_interval;
        o.local_max_to_keep = local_max_to_keep;
        o.persistent_save_interval_steps = persistent_interval;
        o.persistent_max_to_keep = persistent_max_to_keep;
        o.save = StorageOptions(use_ocdbt, use_zarr3, replica_parallel, compression, memory_budget,
                                target_data_file_size, chunk_byte_size, timeout_s);
        o.local_compression = local_compression;
        o.global_process_metadata_json = global_process_metadata;
        o.mesh_metadata_json = mesh_metadata;
        auto opened = Released([&] { return EmergencyCheckpointManager::Open(o, coordinator); });
        return PyEmergencyManager{ValueOrThrow(std::move(opened))};
      },
      nb::arg("local_directory"), nb::arg("persistent_directory"), nb::arg("coordinator"),
      nb::arg("transport") = "", nb::arg("num_replicas") = 1, nb::arg("peer_copies").none() = nb::none(),
      nb::arg("local_save_interval_steps") = 1, nb::arg("local_max_to_keep") = 2,
      nb::arg("persistent_save_interval_steps") = 10, nb::arg("persistent_max_to_keep") = 0,
      nb::arg("use_ocdbt") = true, nb::arg("use_zarr3") = true, nb::arg("compression") = "default",
      nb::arg("memory_budget") = 0, nb::arg("timeout_s") = 600.0, nb::arg("global_process_metadata") = "",
      nb::arg("mesh_metadata") = "", nb::arg("zmq_host") = "", nb::arg("local_compression") = "none",
      nb::arg("at_point").none() = nb::none(), nb::arg("replica_parallel") = true,
      nb::arg("chunk_byte_size") = 0, nb::arg("target_data_file_size") = uint64_t{1} << 31,
      // The manager uses the coordinator for as long as it lives.
      nb::keep_alive<0, 3>());
}

}  // namespace cairn::python
