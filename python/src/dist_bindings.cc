// cairn._core.Coordinator: the coordinators of include/cairn/coordinator.h
// for Python (python/cairn/dist.py wraps them; docs/COORDINATORS.md).
//
// A callback coordinator calls Python functions from whichever C++ thread
// runs a collective, usually with the GIL released (the engine runs without
// it, and so do the collectives bound here), so each call acquires the GIL.
// An exception raised by a callback becomes an Unavailable status carrying
// the exception's text; it never crosses into the library.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include "bindings.h"
#include "cairn/coordinator.h"
#include "cairn/environment.h"
#include "cairn/mpi_coordinator.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

// A Python barrier callable (name) for the file coordination, called on the
// caller's thread with the GIL held; its exception is kept and raised once
// the library call returns (it never crosses into the library).
struct PyNamedBarrier {
  nb::object f;
  std::optional<nb::python_error> error;

  NamedBarrier Fn() {
    return [this](std::string_view name) -> Status {
      try {
        f(nb::str(name.data(), name.size()));
        return Status::OK();
      } catch (nb::python_error& e) {
        const std::string what = e.what();
        error.emplace(std::move(e));
        return UnavailableError("barrier `" + std::string(name) + "`: " + what);
      }
    };
  }
  void RaiseIfFailed() {
    if (error) throw std::move(*error);
  }
};

Coordinator::Duration TimeoutFromSeconds(double seconds) {
  if (std::isnan(seconds) || seconds < 0) {
    ThrowStatus(InvalidArgumentError("timeout_s must be >= 0, not " + std::to_string(seconds)));
  }
  if (seconds >= 1e9) return Coordinator::Duration::max();  // ~31 years: "forever"
  return std::chrono::duration_cast<Coordinator::Duration>(std::chrono::duration<double>(seconds));
}

// Milliseconds for a Python callback: rounded up, so that a positive time
// left never becomes 0, and clamped to what any int argument accepts.
int64_t TimeoutMs(Coordinator::Duration d) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return std::clamp<int64_t>(ms, 0, int64_t{1} << 31);
}

// A Python callable shared by the copies of a std::function. Acquires the
// GIL to be destroyed, since the last copy may die in a thread without it.
class PyCallable {
 public:
  PyCallable(nb::object fn, const char* role) : fn_(new nb::object(std::move(fn))), role_(role) {}
  ~PyCallable() {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
    nb::gil_scoped_acquire gil;
    delete fn_;
  }
  PyCallable(const PyCallable&) = delete;
  PyCallable& operator=(const PyCallable&) = delete;

  // Runs `body(fn)` with the GIL held. A Python exception (or a failed
  // conversion) becomes Unavailable naming the callback and `subject`.
  template <typename T, typename Body>
  Result<T> Run(std::string_view subject, Body&& body) const {
    nb::gil_scoped_acquire gil;
    try {
      return body(*fn_);
    } catch (nb::python_error& e) {
      // "TimeoutError: <message>", without the traceback.
      std::string text = nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
      std::string message = nb::cast<std::string>(nb::str(e.value()));
      if (!message.empty()) text += ": " + message;
      return UnavailableError(Where(subject) + " raised " + text);
    } catch (const std::exception& e) {
      return UnavailableError(Where(subject) + " failed: " + e.what());
    }
  }

  std::string Where(std::string_view subject) const {
    return std::string(role_) + "(`" + std::string(subject) + "`)";
  }

 private:
  nb::object* fn_;
  const char* role_;
};

nb::bytes ToBytes(std::string_view v) { return nb::bytes(v.data(), v.size()); }

// The bytes of a value a callback returned: bytes, or str (as UTF-8).
// REQUIRES: the GIL is held.
Result<std::string> BytesFromPython(nb::handle value, const PyCallable& fn, std::string_view key) {
  if (nb::isinstance<nb::bytes>(value)) {
    nb::bytes b = nb::borrow<nb::bytes>(value);
    return std::string(b.c_str(), b.size());
  }
  if (nb::isinstance<nb::str>(value)) return std::string(nb::borrow<nb::str>(value).c_str());
  return InvalidArgumentError(fn.Where(key) + " returned neither bytes nor str");
}

CoordinatorCallbacks MakeCallbacks(nb::object kv_set, nb::object kv_get, nb::object barrier,
                                   std::string key_prefix) {
  CoordinatorCallbacks cb;
  cb.key_prefix = std::move(key_prefix);
  auto set_fn = std::make_shared<PyCallable>(std::move(kv_set), "kv_set");
  auto get_fn = std::make_shared<PyCallable>(std::move(kv_get), "kv_get");
  cb.key_value_set = [set_fn](std::string_view key, std::string_view value) -> Status {
    return set_fn
        ->Run<bool>(key, [&](const nb::object& fn) {
          fn(KeyToPython(key), ToBytes(value));
          return true;
        })
        .status();
  };
  cb.blocking_key_value_get = [get_fn](std::string_view key,
                                       Coordinator::Duration timeout) -> Result<std::string> {
    return get_fn->Run<std::string>(key, [&](const nb::object& fn) -> Result<std::string> {
      nb::object value = fn(KeyToPython(key), TimeoutMs(timeout));
      return BytesFromPython(value, *get_fn, key);
    });
  };
  if (!barrier.is_none()) {
    auto barrier_fn = std::make_shared<PyCallable>(std::move(barrier), "barrier");
    cb.barrier = [barrier_fn](std::string_view id, Coordinator::Duration timeout) -> Status {
      return barrier_fn
          ->Run<bool>(id, [&](const nb::object& fn) {
            fn(KeyToPython(id), TimeoutMs(timeout));
            return true;
          })
          .status();
    };
  }
  return cb;
}

constexpr double kDefaultTimeoutS = 300.0;

}  // namespace

void BindDist(nb::module_& m) {
  nb::class_<Coordinator>(
      m, "Coordinator",
      "How the processes of a job agree (include/cairn/coordinator.h). Made by\n"
      "single_coordinator(), mpi_coordinator() or callback_coordinator(); every\n"
      "process calls the same collectives with the same names in the same order.\n"
      "Collectives release the GIL; a timeout raises OSError (Unavailable).")
      .def_prop_ro("process_index", &Coordinator::process_index)
      .def_prop_ro("process_count", &Coordinator::process_count)
      .def_prop_ro("is_primary", &Coordinator::is_primary)
      .def(
          "barrier",
          [](Coordinator& c, const std::string& name, double timeout_s) {
            const auto timeout = TimeoutFromSeconds(timeout_s);
            Status s;
            {
              nb::gil_scoped_release release;
              s = c.Barrier(name, timeout);
            }
            ThrowIfError(s);
          },
          nb::arg("name"), nb::arg("timeout_s") = kDefaultTimeoutS,
          "Returns once every process has called barrier(name).")
      .def(
          "all_gather",
          [](Coordinator& c, const std::string& name, nb::bytes value, double timeout_s) {
            const auto timeout = TimeoutFromSeconds(timeout_s);
            std::string v(value.c_str(), value.size());
            Result<std::vector<std::string>> r = InternalError("not run");
            {
              nb::gil_scoped_release release;
              r = c.AllGather(name, v, timeout);
            }
            nb::list out;
            for (const std::string& x : ValueOrThrow(std::move(r))) out.append(ToBytes(x));
            return out;
          },
          nb::arg("name"), nb::arg("value"), nb::arg("timeout_s") = kDefaultTimeoutS,
          "Every process contributes `value`; returns all values (list of bytes),\n"
          "ordered by process index.")
      .def(
          "broadcast",
          [](Coordinator& c, const std::string& name, int root, nb::bytes value,
             double timeout_s) {
            const auto timeout = TimeoutFromSeconds(timeout_s);
            std::string v(value.c_str(), value.size());
            Result<std::string> r = InternalError("not run");
            {
              nb::gil_scoped_release release;
              r = c.Broadcast(name, root, v, timeout);
            }
            return ToBytes(ValueOrThrow(std::move(r)));
          },
          nb::arg("name"), nb::arg("root"), nb::arg("value") = nb::bytes("", 0),
          nb::arg("timeout_s") = kDefaultTimeoutS,
          "Returns process `root`'s value on every process (others' values are ignored).")
      .def(
          "agree",
          [](Coordinator& c, const std::string& name, nb::object error, double timeout_s) {
            const auto timeout = TimeoutFromSeconds(timeout_s);
            Status local = error.is_none()
                               ? Status::OK()
                               : FailedPreconditionError(nb::cast<std::string>(nb::str(error)));
            Status s;
            {
              nb::gil_scoped_release release;
              s = AgreeOnStatus(c, name, local, timeout);
            }
            ThrowIfError(s);
          },
          nb::arg("name"), nb::arg("error") = nb::none(), nb::arg("timeout_s") = kDefaultTimeoutS,
          "Every process passes its own error (or None); raises on every process if\n"
          "any passed one, with the first by process index and where it happened.")
      .def("__repr__", [](const Coordinator& c) {
        return "<cairn Coordinator process " + std::to_string(c.process_index()) + " of " +
               std::to_string(c.process_count()) + ">";
      });

  m.def("single_coordinator", [] { return NewSingleProcessCoordinator(); },
        "The coordinator of a one-process job.");

  m.attr("mpi_available") = MpiCoordinatorAvailable();
  if (MpiCoordinatorAvailable()) {
    m.def(
        "mpi_coordinator",
        [](double timeout_s) {
          const auto timeout = TimeoutFromSeconds(timeout_s);
          Result<std::unique_ptr<Coordinator>> r = InternalError("not run");
          {
            nb::gil_scoped_release release;
            r = NewMpiCoordinator(timeout);
          }
          return ValueOrThrow(std::move(r));
        },
        nb::arg("timeout_s") = 60.0,
        "The MPI coordinator (MPI_COMM_WORLD, duplicated). Initializes MPI if\n"
        "needed; every rank must call it.");
  }

  m.def("_mpi_world_size", [] { return MpiWorldSizeFromEnvironment(); },
        "The world size mpirun announces in the environment; 1 outside mpirun.");

  m.def(
      "_save_coordinator_source",
      [](bool given, int process_count, bool runtime_runs_these_processes, bool has_barrier,
         const std::string& checkpoint_path) -> std::string {
        SaveCoordinatorFacts f;
        f.given = given;
        f.process_count = process_count;
        f.runtime_runs_these_processes = runtime_runs_these_processes;
        f.has_barrier = has_barrier;
        f.checkpoint_path = checkpoint_path;
        switch (ValueOrThrow(ChooseSaveCoordinator(f))) {
          case SaveCoordinatorSource::kGiven: return "given";
          case SaveCoordinatorSource::kJobRuntime: return "runtime";
          case SaveCoordinatorSource::kSharedFiles: return "files";
          case SaveCoordinatorSource::kDetected: break;
        }
        return "detect";
      },
      nb::arg("given"), nb::arg("process_count"), nb::arg("runtime_runs_these_processes"),
      nb::arg("has_barrier"), nb::arg("checkpoint_path"),
      "Where a save's coordinator comes from (include/cairn/environment.h): 'given',\n"
      "'runtime' (jax.distributed), 'files' (_begin_file_coordination) or 'detect'.");

  m.def(
      "_begin_file_coordination",
      [](const std::string& checkpoint_path, int process_index, int process_count, nb::object barrier) {
        PyNamedBarrier b{std::move(barrier), std::nullopt};
        Result<SharedFileCoordination> r =
            BeginSharedFileCoordination(checkpoint_path, process_index, process_count, b.Fn());
        b.RaiseIfFailed();
        SharedFileCoordination c = ValueOrThrow(std::move(r));
        return nb::make_tuple(c.directory, nb::cast(c.coordinator.release(), nb::rv_policy::take_ownership));
      },
      nb::arg("checkpoint_path"), nb::arg("process_index"), nb::arg("process_count"), nb::arg("barrier"),
      "(directory, Coordinator) for processes that share only barrier(name) and the\n"
      "checkpoint's file system (include/cairn/environment.h).");

  m.def(
      "_end_file_coordination",
      [](const std::string& directory, int process_index, nb::object barrier) {
        PyNamedBarrier b{std::move(barrier), std::nullopt};
        Status s = EndSharedFileCoordination(directory, process_index, b.Fn());
        b.RaiseIfFailed();
        ThrowIfError(s);
      },
      nb::arg("directory"), nb::arg("process_index"), nb::arg("barrier"),
      "Ends a file coordination: barrier('cairn_save_done'), then process 0 removes it.");

  m.def(
      "callback_coordinator",
      [](int process_index, int process_count, nb::object kv_set, nb::object kv_get,
         nb::object barrier, const std::string& key_prefix) {
        if (process_count < 1 || process_index < 0 || process_index >= process_count) {
          ThrowStatus(InvalidArgumentError("process_index " + std::to_string(process_index) +
                                           " is not in [0, " + std::to_string(process_count) +
                                           ")"));
        }
        if (!PyCallable_Check(kv_set.ptr()) || !PyCallable_Check(kv_get.ptr()) ||
            (!barrier.is_none() && !PyCallable_Check(barrier.ptr()))) {
          ThrowStatus(InvalidArgumentError("kv_set, kv_get and barrier must be callables"));
        }
        return NewCallbackCoordinator(
            process_index, process_count,
            MakeCallbacks(std::move(kv_set), std::move(kv_get), std::move(barrier), key_prefix));
      },
      nb::arg("process_index"), nb::arg("process_count"), nb::arg("kv_set"), nb::arg("kv_get"),
      nb::arg("barrier") = nb::none(), nb::arg("key_prefix") = "cairn",
      "A coordinator over a key-value store given as Python callables:\n"
      "kv_set(key: str, value: bytes), kv_get(key: str, timeout_ms: int) -> bytes\n"
      "(raises on timeout), and optionally barrier(id: str, timeout_ms: int).\n"
      "Keys are '<key_prefix>/<name>/<k>/<process index or 'root'>'.");
}

}  // namespace cairn::python
