// cairn._core: the native half of the `cairn` Python package. The pure-Python
// modules in python/cairn/ wrap these classes; see their docstrings for the
// public API.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "cairn/zarr/array_url.h"
#include "status_translation.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "Native core of cairn (KvStore and zarr Array).";
  cairn::python::RegisterExceptions(m);
  cairn::python::BindKvStore(m);
  cairn::python::BindArray(m);
  cairn::python::RegisterLayout(m);  // cairn.save / cairn.restore (Orbax)
  cairn::python::RegisterConvert(m);  // cairn.convert
  cairn::python::BindDist(m);  // Coordinator (dist_bindings.cc)
  cairn::python::RegisterEngine(m);  // cairn.save / restore / save_async (engine_bindings.cc)
  cairn::python::RegisterManager(m);  // cairn.CheckpointManager (manager_bindings.cc)
  cairn::python::RegisterEmergency(m);  // cairn.emergency (emergency_bindings.cc)
  cairn::python::RegisterOptions(m);  // _byte_size (options_bindings.cc)
  cairn::python::RegisterEvents(m);  // _set_event_sink (events_bindings.cc)
  m.def("normalize_url", [](const std::string& url) { return cairn::NormalizeUrl(url); },
        nb::arg("url"),
        "Turns a local path into a file:// URL; leaves URLs (and later pipeline parts) alone.");
  cairn::python::RegisterOcdbt(m);  // last: extends KvStore.open and normalize_url
}
