// JSON text laid out as Python's `json.dumps(obj)` writes it (separators
// ", " and ": ", ASCII only with \uXXXX escapes), which is how Orbax writes
// its metadata files. Readers accept any JSON; this only keeps files written
// by cairn identical in form to Orbax's.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "cairn/util/json.h"

namespace cairn::orbax {

// A JSON string literal with Python's ensure_ascii escaping. Invalid UTF-8
// bytes are written as \u00XX of the byte value.
std::string PyJsonString(std::string_view s);

// `j` in json.dumps layout; object members in `j`'s (sorted) order.
std::string PyJsonDumps(const Json& j);

}  // namespace cairn::orbax
