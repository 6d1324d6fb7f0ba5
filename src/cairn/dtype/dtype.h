// Data types of array elements, with their names in every format cairn
// speaks: zarr v3 `data_type` (= TensorStore's type names), zarr v2 `dtype`
// typestrs, and numpy/ml_dtypes names.
//
// In memory every element is stored native-endian (little-endian on every
// supported host), one element per `size()` bytes. int4/int2/float4 use one
// byte per element (int4 sign-extended), as TensorStore stores them.
//
// Thread safety: pure functions and constant tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/result.h"

namespace cairn {

// Values are not persisted; names are (see the name functions).
enum class DType : uint8_t {
  kBool,
  kInt2, kInt4, kInt8, kInt16, kInt32, kInt64,
  kUInt8, kUInt16, kUInt32, kUInt64,
  kFloat16, kBFloat16, kFloat32, kFloat64,
  kComplex64, kComplex128,
  kFloat8E3M4, kFloat8E4M3FN, kFloat8E4M3FNUZ, kFloat8E4M3B11FNUZ,
  kFloat8E5M2, kFloat8E5M2FNUZ, kFloat8E8M0FNU,
  kFloat4E2M1FN,
};

enum class DTypeKind : uint8_t { kBool, kSignedInt, kUnsignedInt, kFloat, kComplex };

struct DTypeInfo {
  DType dtype;
  std::string_view name;          // zarr v3 / TensorStore / numpy-ish name: "bfloat16"
  size_t size;                    // bytes per element in memory and on disk
  DTypeKind kind;
  size_t swap_unit;               // byte-swap unit for endian conversion (1 = none)
  std::string_view zarr2_name;    // typestr without byte order ("f4") or extension name
  bool zarr2_has_byte_order;      // true when zarr2 writes "<" / "|" before zarr2_name
  // Floating-point layout (kFloat, and each half of kComplex).
  int exponent_bits = 0;
  int mantissa_bits = 0;
};

// All dtypes, in enum order.
const std::vector<DTypeInfo>& AllDTypes();
const DTypeInfo& GetDTypeInfo(DType dtype);
inline size_t DTypeSize(DType d) { return GetDTypeInfo(d).size; }
inline std::string_view DTypeName(DType d) { return GetDTypeInfo(d).name; }

// Parses a zarr v3 / TensorStore dtype name ("float32", "bfloat16",
// "float8_e4m3fn", "int4"). InvalidArgument names the unknown type.
Result<DType> ParseDTypeName(std::string_view name);

// A dtype a user names (`--dtype '*=bf16'`, convert(dtype=...)): a
// ParseDTypeName name or a common alias: bf16; fp16, f16, half; fp32, f32,
// single; fp64, f64, double, float (numpy's: float64). InvalidArgument
// names the unknown type and lists the valid names. Not for stored
// metadata, whose names are exact.
Result<DType> ParseUserDTypeName(std::string_view name);

// A zarr v2 dtype: the element type and whether stored bytes are big-endian.
struct Zarr2DType {
  DType dtype;
  bool big_endian = false;
};
// Parses a zarr v2 `dtype` string: "<f4", ">i8", "|b1", "|u1", "bfloat16", ...
Result<Zarr2DType> ParseZarr2DType(std::string_view typestr);
// Formats the zarr v2 `dtype` string as TensorStore writes it (little-endian).
std::string FormatZarr2DType(DType dtype, bool big_endian = false);

// Reverses the byte order of each `swap_unit` group in place.
void SwapEndianInPlace(uint8_t* data, size_t num_bytes, size_t swap_unit);

// ---- Scalars, for fill values -------------------------------------------

// Encodes `value` as one element of `dtype` (native-endian bytes, size()
// long), rounding to nearest-even and saturating/propagating like
// ml_dtypes. REQUIRES: kind is kFloat (for kComplex use each half).
std::vector<uint8_t> EncodeFloat(DType dtype, double value);
// Decodes one float element to double (exact for every supported type).
double DecodeFloat(DType dtype, const uint8_t* element);
// The bit pattern TensorStore uses for "NaN" of a float dtype (e.g. 0x7fc0 for
// bfloat16, 0x7e00 for float16), as native-endian bytes.
std::vector<uint8_t> DefaultNaN(DType dtype);
// Whether the type can represent infinities (false for the *fn/*fnuz float8s).
bool HasInfinity(DType dtype);

}  // namespace cairn
