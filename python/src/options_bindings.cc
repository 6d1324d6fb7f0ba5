// cairn._core._byte_size: the sizes the Python package takes (memory_budget,
// chunk_byte_size, ...) as an int or a string ("1GiB", "512MiB", "4096"),
// read by the parser the CLI uses (include/cairn/options.h).
#include <cstdint>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "cairn/options.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

constexpr const char* kUnits = "B, KiB, MiB, GiB (powers of 1024), KB, MB, GB (of 1000)";

[[noreturn]] void BadSize(const std::string& name, const std::string& why) {
  ThrowStatus(InvalidArgumentError(name + ": " + why + "; a size is a number of bytes or a number with a unit: " +
                                   kUnits + ", e.g. \"1GiB\""));
}

}  // namespace

uint64_t ByteSize(const std::string& name, nb::handle value) {
  if (PyBool_Check(value.ptr())) BadSize(name, "expected an int or a string, got bool");
  if (PyLong_Check(value.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow == 0 && v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow < 0 || (overflow == 0 && v < 0)) BadSize(name, "negative size " + nb::cast<std::string>(nb::str(value)));
    if (overflow == 0) return static_cast<uint64_t>(v);
    const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      BadSize(name, "size " + nb::cast<std::string>(nb::str(value)) + " is too large");
    }
    return static_cast<uint64_t>(u);
  }
  if (nb::isinstance<nb::str>(value)) {
    Result<uint64_t> bytes = ParseByteSize(nb::cast<std::string>(value));
    if (!bytes.ok()) BadSize(name, std::string(bytes.status().message()));
    return *bytes;
  }
  BadSize(name, std::string("expected an int or a string, got ") + Py_TYPE(value.ptr())->tp_name);
}

void RegisterOptions(nb::module_& m) {
  m.def("_byte_size", [](const std::string& name, nb::handle value) { return ByteSize(name, value); },
        nb::arg("name"), nb::arg("value"),
        "`value` (an int, or a string such as \"1GiB\") in bytes; ValueError naming `name` and the units.");
}

}  // namespace cairn::python
