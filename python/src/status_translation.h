// Turning cairn Status errors into Python exceptions: the one table that maps
// every StatusCode to an exception type lives in status_translation.cc.
//
// Thread safety: call with the GIL held.
#pragma once

#include <string_view>

#include <nanobind/nanobind.h>

#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn::python {

// Creates cairn's own exception types (CorruptDataError) and adds them to `m`.
void RegisterExceptions(nanobind::module_& m);

// Raises the Python exception the table maps `status.code()` to, with the
// status message (which names the key and URL). REQUIRES: !status.ok().
[[noreturn]] void ThrowStatus(const Status& status);

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(result).value();
}

}  // namespace cairn::python
