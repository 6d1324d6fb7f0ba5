// cairn._core._EmergencyManager: the native half of
// cairn.emergency.CheckpointManager (python/cairn/emergency.py) over
// src/cairn/emergency/manager.h. Python flattens the tree (as cairn.save
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
#include "cairn/emergency/manager.h"
#include "cairn/emergency/mpi_transport.h"
#include "cairn/emergency/transport_choice.h"
#include "cairn/emergency/zmq_transport.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

using emergency::EmergencyCheckpointManager;
using RawOut = nb::ndarray<nb::device::cpu>;
// (param, dtype name or None, [(origin, writable raw array)])
using PyRestoreArray = std::tuple<std::string, std::optional<std::string>,
                                  std::vector<std::pair<std::vector<int64_t>, RawOut>>>;

const char* TierName(emergency::StepChoice::Tier t) {
  switch (t) {
    case emergency::StepChoice::Tier::kLocal: return "local";
    case emergency::StepChoice::Tier::kPersistent: return "persistent";
    case emergency::StepChoice::Tier::kNone: return "none";
  }
  return "none";
}

template <typename F>
auto Released(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

struct PyEmergencyManager {
  std::unique_ptr<EmergencyCheckpointManager> native;
  std::optional<emergency::PreparedRestore> prepared;

  PyEmergencyManager(std::unique_ptr<EmergencyCheckpointManager> n, std::optional<emergency::PreparedRestore> p)
      : native(std::move(n)), prepared(std::move(p)) {}
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
             ConvertedLeaves converted = ConvertSaveLeaves(leaves, /*honor_immutable=*/true);
             EmergencyCheckpointManager& native = s.get();
             std::shared_ptr<void> hold = HoldArrays(std::move(converted.keep));
             Result<bool> saved =
                 Released([&] { return native.Save(step, converted.leaves, force, std::move(hold)); });
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
             s.prepared = ValueOrThrow(Released([&] { return native.PrepareRestore(step); }));
             const auto& p = *s.prepared;
             return std::make_tuple(std::string(TierName(p.choice.tier)), p.choice.step, p.metadata_item, p.log);
           },
           nb::arg("step").none())
      .def("restore",
           [](PyEmergencyManager& s, const std::vector<PyRestoreArray>& arrays, bool map_boxes) {
             if (!s.prepared) ThrowStatus(FailedPreconditionError("restore before prepare_restore"));
             std::vector<engine::ArrayToRestore> request;
             // With map_boxes: per box, where the engine may put a mapping
             // of the stored chunk instead of filling the box.
             std::vector<std::vector<std::shared_ptr<MappedBytes>>> slots(arrays.size());
             for (size_t ai = 0; ai < arrays.size(); ++ai) slots[ai].resize(std::get<2>(arrays[ai]).size());
             for (const auto& [param, dtype, boxes] : arrays) {
               engine::ArrayToRestore a;
               a.param = param;
               if (dtype) a.dtype = ValueOrThrow(ParseDTypeName(*dtype));
               for (const auto& [origin, out] : boxes) {
                 Shape shape(out.ndim());
                 std::vector<Index> strides(out.ndim());
                 for (size_t d = 0; d < out.ndim(); ++d) {
                   shape[d] = static_cast<Index>(out.shape(d));
                   strides[d] = out.stride(d) * static_cast<Index>(out.itemsize());
                 }
                 std::shared_ptr<MappedBytes>* slot =
                     map_boxes ? &slots[request.size()][a.boxes.size()] : nullptr;
                 a.boxes.push_back({Box(origin, shape), out.data(), strides, slot});
               }
               request.push_back(std::move(a));
             }
             EmergencyCheckpointManager& native = s.get();
             auto report = ValueOrThrow(Released([&] { return native.Restore(*s.prepared, std::move(request)); }));
             s.prepared.reset();
             nb::dict d;
             d["tier"] = TierName(report.tier);
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
             for (size_t ai = 0; ai < slots.size(); ++ai) {
               for (size_t bi = 0; bi < slots[ai].size(); ++bi) {
                 if (slots[ai][bi] == nullptr) continue;
                 auto* hold = new std::shared_ptr<MappedBytes>(std::move(slots[ai][bi]));
                 nb::capsule owner(hold, [](void* p) noexcept {
                   delete static_cast<std::shared_ptr<MappedBytes>*>(p);
                 });
                 const size_t n = (*hold)->size();
                 nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>> view((*hold)->data(), {n}, owner);
                 mapped.append(nb::make_tuple(ai, bi, view));
               }
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

  m.def("_emergency_zmq_available", [] { return emergency::ZmqTransportAvailable(); });
  m.def(
      "_emergency_open",
      [](const std::string& local_directory, const std::string& persistent_directory, Coordinator& coordinator,
         const std::string& transport, int num_replicas, std::optional<int> peer_copies, int64_t local_interval,
         int local_max_to_keep, int64_t persistent_interval, int persistent_max_to_keep, bool use_ocdbt,
         bool use_zarr3, const std::string& compression, uint64_t memory_budget, double timeout_s,
         const std::string& global_process_metadata, const std::string& mesh_metadata,
         const std::string& zmq_host, const std::string& local_compression, nb::object at_point) {
        emergency::EmergencyOptions o;
        // An observer of the named points of saves, transfers and retention
        // (manager.h), called with (point, step); crash tests kill from it.
        if (!at_point.is_none()) {
          o.at_point = [held = HoldCallable(std::move(at_point))](std::string_view point, int64_t step) {
            CallObserver(held, "cairn.emergency.CheckpointManager at_point callback", nb::str(point.data(), point.size()),
                         step);
          };
        }
        o.local_directory = local_directory;
        o.persistent_directory = persistent_directory;
        o.num_replicas = num_replicas;
        o.local_save_interval_steps = local_interval;
        o.local_max_to_keep = local_max_to_keep;
        o.persistent_save_interval_steps = persistent_interval;
        o.persistent_max_to_keep = persistent_max_to_keep;
        o.save.use_ocdbt = use_ocdbt;
        o.save.use_zarr3 = use_zarr3;
        o.save.compression = ConvertCompression(compression);
        if (local_compression.empty()) o.local_compression = std::nullopt;
        else o.local_compression = ConvertCompression(local_compression);
        o.save.memory_budget_bytes = memory_budget;
        o.save.timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(timeout_s));
        o.global_process_metadata_json = global_process_metadata;
        o.mesh_metadata_json = mesh_metadata;
        // The transport named, or the one the job's environment calls for
        // (emergency/transport_choice.h).
        const emergency::TransportChoice choice = ValueOrThrow(emergency::ChooseTransport(
            transport, peer_copies, num_replicas, emergency::DetectTransportEnvironment(coordinator)));
        o.peer_copies = choice.peer_copies;
        std::shared_ptr<emergency::PeerTransport> peers = ValueOrThrow(Released(
            [&] { return emergency::OpenTransport(choice.kind, coordinator, zmq_host, o.save.timeout); }));
        auto opened = Released([&] { return EmergencyCheckpointManager::Open(o, coordinator, peers); });
        return PyEmergencyManager{ValueOrThrow(std::move(opened)), std::nullopt};
      },
      nb::arg("local_directory"), nb::arg("persistent_directory"), nb::arg("coordinator"),
      nb::arg("transport") = "", nb::arg("num_replicas") = 1, nb::arg("peer_copies").none() = nb::none(),
      nb::arg("local_save_interval_steps") = 1, nb::arg("local_max_to_keep") = 2,
      nb::arg("persistent_save_interval_steps") = 10, nb::arg("persistent_max_to_keep") = 0,
      nb::arg("use_ocdbt") = true, nb::arg("use_zarr3") = true, nb::arg("compression") = "default",
      nb::arg("memory_budget") = 0, nb::arg("timeout_s") = 600.0, nb::arg("global_process_metadata") = "",
      nb::arg("mesh_metadata") = "", nb::arg("zmq_host") = "", nb::arg("local_compression") = "none",
      nb::arg("at_point").none() = nb::none(),
      // The manager uses the coordinator for as long as it lives.
      nb::keep_alive<0, 3>());
}

}  // namespace cairn::python
