// Zarr `fill_value` JSON <-> one native-endian element, with TensorStore's
// exact encodings.
//
// v3 floats (every float kind, and each half of a complex): finite values as
// JSON numbers (printed as double: 0.0, -0.0), "Infinity", "-Infinity", the
// dtype's default NaN as "NaN", any other NaN as "0x" + the zero-padded hex
// bit pattern ("0x7fc1"); "0x..." is also accepted on read. Complex:
// [re, im]. bool: JSON bool. Integers: JSON integers in range (integral
// floats such as 1.0 accepted on read).
// v2: the same, except that every NaN is "NaN", a string is parsed as a
// decimal number, and null means "no fill value" (zeros).
//
// Errors: InvalidArgument "fill_value: ..." saying what was expected.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/util/json.h"

namespace cairn {

Result<std::vector<uint8_t>> ParseFillValueV3(const Json& j, DType dtype);
Json FillValueToJsonV3(DType dtype, const std::vector<uint8_t>& element);

// nullopt for JSON null.
Result<std::optional<std::vector<uint8_t>>> ParseFillValueV2(const Json& j, DType dtype);
Json FillValueToJsonV2(DType dtype, const std::vector<uint8_t>& element);

// The zero element of `dtype` (0, false, 0.0).
std::vector<uint8_t> ZeroElement(DType dtype);

}  // namespace cairn
