// Parsers of the options users write as text (the CLI's flags, the Python
// package's keyword arguments), the same for every caller.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "cairn/result.h"

namespace cairn {

// A byte count: a number (fractions allowed) and an optional unit, case
// ignored: B, K/KiB, M/MiB, G/GiB (powers of 1024), KB, MB, GB (of 1000).
// "1GiB", "512MiB", "64k", "1.5G", "1000" -> bytes (rounded down).
// Errors: InvalidArgument naming the text when it is not a number with a
// known unit, negative, or at least 2^64 bytes.
Result<uint64_t> ParseByteSize(std::string_view text);

}  // namespace cairn
