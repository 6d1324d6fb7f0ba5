// cairn._core._CheckpointManager: the native half of cairn.CheckpointManager
// (python/cairn/manager.py) over include/cairn/checkpoint_manager.h. Python flattens
// the tree (cairn._leaves.flatten) and passes the leaves; everything else —
// step discovery, the save decision, retention, deletion — runs here. The
// GIL is released while the manager works (its collectives may call back
// into Python through a callback coordinator).
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cairn/checkpoint_manager.h"
#include "cairn/coordinator.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

struct PyManager {
  std::unique_ptr<CheckpointManager> m;
  // The Python arrays of the save in flight (its jax.Array shards are read
  // in the background, not snapshotted): dropped, GIL held, once it is
  // finished (the next save waits for it first).
  std::shared_ptr<void> keep;

  PyManager(std::unique_ptr<CheckpointManager> manager) : m(std::move(manager)) {}
  PyManager(PyManager&&) = default;
  // The manager's background work may call a Python coordinator: wait for
  // it without the GIL.
  ~PyManager() {
    if (m == nullptr) return;
    nb::gil_scoped_release release;
    m.reset();
  }

  template <typename F>
  auto Unlocked(F f) {
    nb::gil_scoped_release release;
    return f();
  }
};

}  // namespace

std::shared_ptr<nb::object> HoldCallable(nb::object f) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(f)), [](nb::object* o) {
    if (!nb::is_alive()) return;  // shutting down: left alone
    nb::gil_scoped_acquire gil;
    delete o;
  });
}

std::function<void(std::string_view)> PointObserver(nb::object f, const char* what) {
  if (f.is_none()) return {};
  return [held = HoldCallable(std::move(f)), what](std::string_view point) {
    CallObserver(held, what, nb::str(point.data(), point.size()));
  };
}

void RegisterManager(nb::module_& m) {
  nb::class_<PyManager>(m, "_CheckpointManager")
      .def("should_save", [](PyManager& p, int64_t step) { return p.m->ShouldSave(step); })
      .def(
          "save",
          [](PyManager& p, int64_t step, nb::handle leaves, bool force,
             std::vector<std::pair<std::string, std::string>> extra_files,
             std::map<std::string, std::string> extra_item_handlers, const std::string& item_name,
             std::optional<double> score, const std::string& custom_json, nb::object progress) {
            ConvertedLeaves converted = ConvertSaveLeaves(leaves);
            StepSaveOptions extras{std::move(extra_files), std::move(extra_item_handlers), item_name, score,
                                   custom_json,
                                   ProgressObserver(std::move(progress),
                                                    "cairn.CheckpointManager.save progress callback")};
            auto saved = p.Unlocked([&] { return p.m->Save(step, converted.arrays, force, extras); });
            // Save waited for the previous save: its arrays may go.
            p.keep = std::move(converted.keep);
            return ValueOrThrow(std::move(saved));
          },
          nb::arg("step"), nb::arg("leaves"), nb::arg("force") = false,
          nb::arg("extra_files") = std::vector<std::pair<std::string, std::string>>(),
          nb::arg("extra_item_handlers") = std::map<std::string, std::string>(), nb::arg("item_name") = "", nb::arg("score") = nb::none(),
          nb::arg("custom_metadata") = "null", nb::arg("progress").none() = nb::none())
      .def("wait_until_finished",
           [](PyManager& p) {
             Status s = p.Unlocked([&] { return p.m->WaitUntilFinished(); });
             p.keep.reset();
             ThrowIfError(s);
           })
      .def("all_steps", [](PyManager& p) { return ValueOrThrow(p.m->AllSteps()); })
      .def("latest_step", [](PyManager& p) { return ValueOrThrow(p.m->LatestStep()); })
      .def("pending_step", [](PyManager& p) { return p.m->PendingStep(); })
      .def("step_path", [](PyManager& p, int64_t step) { return ValueOrThrow(p.m->StepPath(step)); })
      .def("delete", [](PyManager& p, int64_t step) { ThrowIfError(p.Unlocked([&] { return p.m->Delete(step); })); })
      .def("reload", [](PyManager& p) { ThrowIfError(p.Unlocked([&] { return p.m->Reload(); })); })
      .def("set_scores", [](PyManager& p, std::map<int64_t, double> scores) { p.m->SetScores(std::move(scores)); })
      .def("close",
           [](PyManager& p) {
             Status s = p.Unlocked([&] { return p.m->Close(); });
             p.keep.reset();
             ThrowIfError(s);
           })
      .def_prop_ro("directory", [](PyManager& p) { return p.m->directory(); });

  m.def(
      "_manager_open",
      [](const std::string& directory, Coordinator& coordinator, int64_t save_interval_steps,
         std::optional<int64_t> max_to_keep, std::optional<int64_t> keep_period, bool enable_async,
         const std::string& step_prefix, std::optional<int> step_format_fixed_length, const std::string& item_name,
         bool use_ocdbt, bool use_zarr3, bool replica_parallel, const std::string& compression,
         uint64_t memory_budget, uint64_t target_data_file_size, uint64_t chunk_byte_size, double timeout_s,
         nb::object at_point, bool retention_by_score, bool higher_is_better, bool keep_unscored) {
        CheckpointManagerOptions o;
        o.save_interval_steps = save_interval_steps;
        o.max_to_keep = max_to_keep;
        o.keep_period = keep_period;
        o.retention_by_score = retention_by_score;
        o.higher_is_better = higher_is_better;
        o.keep_unscored = keep_unscored;
        o.enable_async = enable_async;
        o.step_prefix = step_prefix;
        o.step_format_fixed_length = step_format_fixed_length;
        o.item_name = item_name;
        o.save = StorageOptions(use_ocdbt, use_zarr3, replica_parallel, compression, memory_budget,
                                target_data_file_size, chunk_byte_size, timeout_s);
        // An observer of the named points a save or a deletion reaches;
        // crash tests pass one that kills the process.
        o.at_point = PointObserver(std::move(at_point), "cairn.CheckpointManager at_point callback");
        Result<std::unique_ptr<CheckpointManager>> opened = InternalError("not opened");
        {
          nb::gil_scoped_release release;
          opened = CheckpointManager::Open(directory, o, coordinator);
        }
        return PyManager{ValueOrThrow(std::move(opened))};
      },
      nb::arg("directory"), nb::arg("coordinator"), nb::arg("save_interval_steps") = 1,
      nb::arg("max_to_keep") = nb::none(), nb::arg("keep_period") = nb::none(), nb::arg("enable_async") = true,
      nb::arg("step_prefix") = "", nb::arg("step_format_fixed_length") = nb::none(),
      nb::arg("item_name") = "default", nb::arg("use_ocdbt") = true, nb::arg("use_zarr3") = true,
      nb::arg("replica_parallel") = true, nb::arg("compression") = "default", nb::arg("memory_budget") = 0,
      nb::arg("target_data_file_size") = uint64_t{1} << 31, nb::arg("chunk_byte_size") = 0,
      nb::arg("timeout_s") = 600.0, nb::arg("at_point").none() = nb::none(), nb::arg("retention_by_score") = false,
      nb::arg("higher_is_better") = true, nb::arg("keep_unscored") = true,
      // The manager's background work uses the coordinator until it is closed.
      nb::keep_alive<0, 2>());
}

}  // namespace cairn::python
