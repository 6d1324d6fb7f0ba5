// Declarations shared by the binding sources of cairn._core.
#pragma once

#include <string>
#include <string_view>

#include <nanobind/nanobind.h>

namespace cairn::python {

void BindKvStore(nanobind::module_& m);
void BindArray(nanobind::module_& m);
void RegisterLayout(nanobind::module_& m);  // layout_bindings.cc
void RegisterOcdbt(nanobind::module_& m);  // ocdbt_bindings.cc
void RegisterConvert(nanobind::module_& m);  // convert_bindings.cc
// dist_bindings.cc: binds cairn::Coordinator as _core.Coordinator, so other
// bindings take a `cairn::Coordinator&` argument directly. A callback
// coordinator calls Python and takes the GIL to do so: release the GIL
// (nb::gil_scoped_release) around any call that may run collectives.
void BindDist(nanobind::module_& m);

// Keys are byte strings; Python sees them as str decoded from UTF-8 with
// "surrogateescape", so keys that are not UTF-8 round-trip.
std::string KeyFromPython(nanobind::handle key);
nanobind::str KeyToPython(std::string_view key);

}  // namespace cairn::python
