// Declarations shared by the binding sources of cairn._core.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "cairn/engine.h"
#include "cairn/orbax.h"

namespace cairn::python {

void BindKvStore(nanobind::module_& m);
void BindArray(nanobind::module_& m);
void RegisterLayout(nanobind::module_& m);  // layout_bindings.cc
void RegisterOcdbt(nanobind::module_& m);  // ocdbt_bindings.cc
void RegisterEmergency(nanobind::module_& m);  // emergency_bindings.cc: cairn.emergency
void RegisterConvert(nanobind::module_& m);  // convert_bindings.cc
// dist_bindings.cc: binds cairn::Coordinator as _core.Coordinator, so other
// bindings take a `cairn::Coordinator&` argument directly. A callback
// coordinator calls Python and takes the GIL to do so: release the GIL
// (nb::gil_scoped_release) around any call that may run collectives.
void BindDist(nanobind::module_& m);
void RegisterEngine(nanobind::module_& m);  // engine_bindings.cc: cairn.save / restore / save_async
void RegisterManager(nanobind::module_& m);  // manager_bindings.cc: cairn.CheckpointManager
void RegisterOptions(nanobind::module_& m);  // options_bindings.cc: sizes given as "1GiB"
void RegisterEvents(nanobind::module_& m);  // events_bindings.cc: events to Python's logging

// options_bindings.cc: a size keyword (`name`, e.g. "memory_budget") given
// as an int or a string such as "1GiB" (ParseByteSize, as the CLI reads
// it), in bytes; ValueError naming `name` and the units otherwise.
uint64_t ByteSize(const std::string& name, nanobind::handle value);

// engine_bindings.cc, for other bindings: the leaves of a flattened tree
// (the `leaves` argument of _engine_save) as the public arrays
// (include/cairn/engine.h). `keep` holds the Python arrays the shards point
// into: shards the leaves mark immutable (jax.Array buffers) are not
// snapshotted, so keep it until the save is finished, and drop it with the
// GIL held.
struct ConvertedLeaves {
  std::vector<CheckpointArray> arrays;
  std::shared_ptr<void> keep;
};
ConvertedLeaves ConvertSaveLeaves(nanobind::handle leaves);

// engine_bindings.cc, for other bindings: a restore request's arrays,
// each (param, dtype name or None, [(origin, writable raw array)]).
using PyRestoreArray =
    std::tuple<std::string, std::optional<std::string>,
               std::vector<std::pair<std::vector<int64_t>, nanobind::ndarray<nanobind::device::cpu>>>>;
std::vector<RestoreArray> ConvertRestoreArrays(const std::vector<PyRestoreArray>& arrays);

// A timeout in seconds as the public options take it.
std::chrono::nanoseconds Seconds(double seconds);

// The storage options that cairn.save, cairn.CheckpointManager and
// cairn.emergency.CheckpointManager take under the same keyword names
// (engine_bindings.cc).
SaveCheckpointOptions StorageOptions(bool use_ocdbt, bool use_zarr3, bool replica_parallel,
                                     const std::string& compression, uint64_t memory_budget,
                                     uint64_t target_data_file_size, uint64_t chunk_byte_size,
                                     double timeout_s);

// layout_bindings.cc: the item an `_OrbaxItem` (from _orbax_open_item) holds,
// for the engine to restore from without opening it again; null for None.
std::shared_ptr<const CheckpointItem> OrbaxItemFromPython(nanobind::handle item);

// Keys are byte strings; Python sees them as str decoded from UTF-8 with
// "surrogateescape", so keys that are not UTF-8 round-trip.
std::string KeyFromPython(nanobind::handle key);
nanobind::str KeyToPython(std::string_view key);

// A Python callable shared by the copies of a native callback: the last one
// drops it with the GIL held (not once the interpreter is shutting down).
std::shared_ptr<nanobind::object> HoldCallable(nanobind::object f);

// Calls `held(args...)` with the GIL taken (from any thread); an exception
// it raises is reported as unraisable (`what` names the callback) and the
// native work goes on. Nothing once the interpreter is shutting down.
template <typename... Args>
void CallObserver(const std::shared_ptr<nanobind::object>& held, const char* what, Args&&... args) {
  if (!nanobind::is_alive()) return;
  nanobind::gil_scoped_acquire gil;
  try {
    (*held)(std::forward<Args>(args)...);
  } catch (nanobind::python_error& e) {
    e.discard_as_unraisable(what);
  }
}

// A progress callback of a save or restore (include/cairn/engine.h):
// `f(bytes_done, bytes_total)` by CallObserver. Empty for None
// (events_bindings.cc).
std::function<void(uint64_t, uint64_t)> ProgressObserver(nanobind::object f, const char* what);

// An observer the native code calls at its named points (a manager's
// ManagerHooks::at_point), from any of its threads: `f(point)` by
// CallObserver. Empty for None.
std::function<void(std::string_view)> PointObserver(nanobind::object f, const char* what);

}  // namespace cairn::python
