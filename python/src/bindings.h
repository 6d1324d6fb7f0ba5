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
void BindDist(nanobind::module_& m);  // dist_bindings.cc: Coordinator

// Keys are byte strings; Python sees them as str decoded from UTF-8 with
// "surrogateescape", so keys that are not UTF-8 round-trip.
std::string KeyFromPython(nanobind::handle key);
nanobind::str KeyToPython(std::string_view key);

}  // namespace cairn::python
