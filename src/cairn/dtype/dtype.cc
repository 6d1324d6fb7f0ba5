#include "cairn/dtype/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace cairn {
namespace {

using K = DTypeKind;

// Every dtype, in enum order. Columns: dtype, name, size, kind, swap_unit,
// zarr2_name, zarr2_has_byte_order, exponent_bits, mantissa_bits.
const std::vector<DTypeInfo>& Table() {
  static const std::vector<DTypeInfo>* table = new std::vector<DTypeInfo>{
      {DType::kBool, "bool", 1, K::kBool, 1, "b1", true},
      {DType::kInt2, "int2", 1, K::kSignedInt, 1, "int2", false},
      {DType::kInt4, "int4", 1, K::kSignedInt, 1, "int4", false},
      {DType::kInt8, "int8", 1, K::kSignedInt, 1, "i1", true},
      {DType::kInt16, "int16", 2, K::kSignedInt, 2, "i2", true},
      {DType::kInt32, "int32", 4, K::kSignedInt, 4, "i4", true},
      {DType::kInt64, "int64", 8, K::kSignedInt, 8, "i8", true},
      {DType::kUInt8, "uint8", 1, K::kUnsignedInt, 1, "u1", true},
      {DType::kUInt16, "uint16", 2, K::kUnsignedInt, 2, "u2", true},
      {DType::kUInt32, "uint32", 4, K::kUnsignedInt, 4, "u4", true},
      {DType::kUInt64, "uint64", 8, K::kUnsignedInt, 8, "u8", true},
      {DType::kFloat16, "float16", 2, K::kFloat, 2, "f2", true, 5, 10},
      {DType::kBFloat16, "bfloat16", 2, K::kFloat, 2, "bfloat16", false, 8, 7},
      {DType::kFloat32, "float32", 4, K::kFloat, 4, "f4", true, 8, 23},
      {DType::kFloat64, "float64", 8, K::kFloat, 8, "f8", true, 11, 52},
      {DType::kComplex64, "complex64", 8, K::kComplex, 4, "c8", true, 8, 23},
      {DType::kComplex128, "complex128", 16, K::kComplex, 8, "c16", true, 11, 52},
      {DType::kFloat8E3M4, "float8_e3m4", 1, K::kFloat, 1, "float8_e3m4", false, 3, 4},
      {DType::kFloat8E4M3FN, "float8_e4m3fn", 1, K::kFloat, 1, "float8_e4m3fn", false, 4, 3},
      {DType::kFloat8E4M3FNUZ, "float8_e4m3fnuz", 1, K::kFloat, 1, "float8_e4m3fnuz", false, 4,
       3},
      {DType::kFloat8E4M3B11FNUZ, "float8_e4m3b11fnuz", 1, K::kFloat, 1, "float8_e4m3b11fnuz",
       false, 4, 3},
      {DType::kFloat8E5M2, "float8_e5m2", 1, K::kFloat, 1, "float8_e5m2", false, 5, 2},
      {DType::kFloat8E5M2FNUZ, "float8_e5m2fnuz", 1, K::kFloat, 1, "float8_e5m2fnuz", false, 5,
       2},
      {DType::kFloat8E8M0FNU, "float8_e8m0fnu", 1, K::kFloat, 1, "float8_e8m0fnu", false, 8, 0},
      {DType::kFloat4E2M1FN, "float4_e2m1fn", 1, K::kFloat, 1, "float4_e2m1fn", false, 2, 1},
  };
  return *table;
}

// How a small float format spends its special bit patterns (ml_dtypes).
enum class Special {
  kIeee,    // all-ones exponent: mantissa 0 = inf, else NaN (float16, bfloat16, e3m4, e5m2)
  kFn,      // no inf; only all-ones exponent and mantissa is NaN (e4m3fn)
  kFnuz,    // no inf, no -0; 0x80 is the only NaN (e4m3fnuz, e4m3b11fnuz, e5m2fnuz)
  kE8M0,    // unsigned powers of two 2^(bits-127); 0xff is NaN; no zero
  kNoNaN,   // no inf, no NaN: overflow saturates (float4_e2m1fn)
};

struct SmallFloat {
  int total_bits;
  int ebits;
  int mbits;
  int bias;
  Special special;
};

SmallFloat SmallFloatFormat(DType d) {
  switch (d) {
    case DType::kFloat16: return {16, 5, 10, 15, Special::kIeee};
    case DType::kBFloat16: return {16, 8, 7, 127, Special::kIeee};
    case DType::kFloat8E3M4: return {8, 3, 4, 3, Special::kIeee};
    case DType::kFloat8E4M3FN: return {8, 4, 3, 7, Special::kFn};
    case DType::kFloat8E4M3FNUZ: return {8, 4, 3, 8, Special::kFnuz};
    case DType::kFloat8E4M3B11FNUZ: return {8, 4, 3, 11, Special::kFnuz};
    case DType::kFloat8E5M2: return {8, 5, 2, 15, Special::kIeee};
    case DType::kFloat8E5M2FNUZ: return {8, 5, 2, 16, Special::kFnuz};
    case DType::kFloat8E8M0FNU: return {8, 8, 0, 127, Special::kE8M0};
    case DType::kFloat4E2M1FN: return {4, 2, 1, 1, Special::kNoNaN};
    default: return {0, 0, 0, 0, Special::kIeee};
  }
}

uint32_t SignBit(const SmallFloat& f) { return 1u << (f.total_bits - 1); }
uint32_t ExpAllOnes(const SmallFloat& f) { return ((1u << f.ebits) - 1) << f.mbits; }

// The NaN pattern ml_dtypes produces when converting a NaN of sign `negative`.
uint32_t SmallNaN(const SmallFloat& f, bool negative) {
  switch (f.special) {
    case Special::kIeee: {
      uint32_t bits = ExpAllOnes(f) | (1u << (f.mbits - 1));
      return negative ? bits | SignBit(f) : bits;
    }
    case Special::kFn: {
      uint32_t bits = SignBit(f) - 1;
      return negative ? bits | SignBit(f) : bits;
    }
    case Special::kFnuz: return SignBit(f);
    case Special::kE8M0: return 0xff;
    case Special::kNoNaN: return negative ? 0 : SignBit(f);  // ml_dtypes: NaN -> -0.0
  }
  return 0;
}

// Largest finite bit pattern without the sign.
uint32_t MaxFiniteBits(const SmallFloat& f) {
  switch (f.special) {
    case Special::kIeee: return ExpAllOnes(f) - 1;
    case Special::kFn: return SignBit(f) - 2;
    case Special::kFnuz: return SignBit(f) - 1;
    case Special::kE8M0: return 0xfe;
    case Special::kNoNaN: return SignBit(f) - 1;
  }
  return 0;
}

uint32_t EncodeE8M0(double v) {
  if (std::isnan(v) || std::signbit(v) || v == 0 || std::isinf(v)) return 0xff;
  int exp2 = 0;
  double frac = std::frexp(v, &exp2);  // v = frac * 2^exp2, frac in [0.5, 1)
  int64_t e = exp2 - 1;                // v = (2 * frac) * 2^e, 2 * frac in [1, 2)
  if (frac >= 0.75) ++e;               // ml_dtypes rounds ties upward for this type
  int64_t biased = e + 127;
  if (biased < 0) return 0x00;         // below the smallest value: round to 2^-127
  if (biased > 0xfe) return 0xff;
  return static_cast<uint32_t>(biased);
}

uint32_t EncodeSmall(const SmallFloat& f, double v) {
  if (f.special == Special::kE8M0) return EncodeE8M0(v);
  const bool negative = std::signbit(v);
  if (std::isnan(v)) return SmallNaN(f, negative);
  const uint32_t sign = negative ? SignBit(f) : 0;
  const double a = std::fabs(v);
  uint32_t magnitude;
  if (std::isinf(a)) {
    magnitude = MaxFiniteBits(f) + 1;  // forced into the overflow path below
  } else if (a == 0) {
    magnitude = 0;
  } else {
    int exp2 = 0;
    std::frexp(a, &exp2);
    const int64_t e = exp2 - 1;  // a in [2^e, 2^(e+1))
    const int64_t biased = e + f.bias;
    // Quantum of the binade (normal) or of the subnormal range.
    const int64_t quantum_exp = (biased >= 1 ? e : 1 - f.bias) - f.mbits;
    if (biased > (int64_t{1} << f.ebits) + 1) {
      magnitude = MaxFiniteBits(f) + 1;  // far out of range; avoid shifting huge values
    } else {
      const double q = std::ldexp(a, static_cast<int>(-quantum_exp));  // exact
      double r = std::floor(q);
      const double frac = q - r;
      if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
      const int64_t m = static_cast<int64_t>(r);
      // Normal: (biased - 1) << mbits plus the mantissa with its implicit bit,
      // which carries into the exponent when rounding overflows the binade.
      const int64_t bits = (biased >= 1 ? (biased - 1) << f.mbits : 0) + m;
      magnitude = static_cast<uint32_t>(bits);
    }
  }
  if (magnitude > MaxFiniteBits(f)) {
    switch (f.special) {
      case Special::kIeee: return sign | ExpAllOnes(f);  // infinity
      case Special::kFn:
      case Special::kFnuz: return SmallNaN(f, negative);
      case Special::kNoNaN: return sign | MaxFiniteBits(f);
      case Special::kE8M0: return 0xff;
    }
  }
  if (magnitude == 0 && f.special == Special::kFnuz) return 0;  // no negative zero
  return sign | magnitude;
}

double DecodeSmall(const SmallFloat& f, uint32_t bits) {
  bits &= (f.total_bits == 32) ? 0xffffffffu : ((1u << f.total_bits) - 1);
  if (f.special == Special::kE8M0) {
    if (bits == 0xff) return std::numeric_limits<double>::quiet_NaN();
    return std::ldexp(1.0, static_cast<int>(bits) - 127);
  }
  const bool negative = (bits & SignBit(f)) != 0;
  const uint32_t magnitude = bits & (SignBit(f) - 1);
  const uint32_t exponent = magnitude >> f.mbits;
  const uint32_t mantissa = magnitude & ((1u << f.mbits) - 1);
  switch (f.special) {
    case Special::kIeee:
      if (exponent == (1u << f.ebits) - 1) {
        if (mantissa != 0) return std::numeric_limits<double>::quiet_NaN();
        return negative ? -std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::infinity();
      }
      break;
    case Special::kFn:
      if (magnitude == SignBit(f) - 1) return std::numeric_limits<double>::quiet_NaN();
      break;
    case Special::kFnuz:
      if (bits == SignBit(f)) return std::numeric_limits<double>::quiet_NaN();
      break;
    default:
      break;
  }
  double value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mbits);
  } else {
    value = std::ldexp(static_cast<double>((1u << f.mbits) | mantissa),
                       static_cast<int>(exponent) - f.bias - f.mbits);
  }
  return negative ? -value : value;
}

void StoreBits(uint32_t bits, size_t size, uint8_t* out) {
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(bits >> (8 * i));
}

uint32_t LoadBits(const uint8_t* in, size_t size) {
  uint32_t bits = 0;
  for (size_t i = 0; i < size; ++i) bits |= uint32_t{in[i]} << (8 * i);
  return bits;
}

}  // namespace

const std::vector<DTypeInfo>& AllDTypes() { return Table(); }

const DTypeInfo& GetDTypeInfo(DType dtype) { return Table()[static_cast<size_t>(dtype)]; }

Result<DType> ParseDTypeName(std::string_view name) {
  for (const DTypeInfo& info : Table()) {
    if (info.name == name) return info.dtype;
  }
  return InvalidArgumentError("unknown data type `" + std::string(name.substr(0, 100)) + "`");
}

Result<DType> ParseUserDTypeName(std::string_view name) {
  static constexpr std::pair<std::string_view, DType> kAliases[] = {
      {"bf16", DType::kBFloat16}, {"fp16", DType::kFloat16}, {"f16", DType::kFloat16},
      {"half", DType::kFloat16},  {"fp32", DType::kFloat32}, {"f32", DType::kFloat32},
      {"single", DType::kFloat32}, {"fp64", DType::kFloat64}, {"f64", DType::kFloat64},
      {"double", DType::kFloat64}, {"float", DType::kFloat64},
  };
  for (const auto& [alias, dtype] : kAliases) {
    if (alias == name) return dtype;
  }
  if (auto parsed = ParseDTypeName(name); parsed.ok()) return parsed;
  std::string names;
  for (const DTypeInfo& info : Table()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  names += "; aliases:";
  for (const auto& [alias, dtype] : kAliases) names += " " + std::string(alias);
  return InvalidArgumentError("unknown data type `" + std::string(name.substr(0, 100)) +
                              "` (valid: " + names + ")");
}

Result<Zarr2DType> ParseZarr2DType(std::string_view typestr) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("invalid zarr v2 dtype `" + std::string(typestr.substr(0, 100)) +
                                "`: " + std::string(why));
  };
  for (const DTypeInfo& info : Table()) {
    if (!info.zarr2_has_byte_order && info.zarr2_name == typestr) {
      return Zarr2DType{info.dtype, false};
    }
  }
  if (typestr.size() < 2) return bad("unknown type");
  const char order = typestr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    return bad("expected a byte order `<`, `>`, `|` or `=` or an extension type name");
  }
  std::string_view rest = typestr.substr(1);
  for (const DTypeInfo& info : Table()) {
    if (!info.zarr2_has_byte_order || info.zarr2_name != rest) continue;
    if (order == '|' && info.size != 1) return bad("`|` (no byte order) on a multi-byte type");
    const bool big_endian = order == '>' && info.swap_unit > 1;
    return Zarr2DType{info.dtype, big_endian};
  }
  return bad("unknown type");
}

std::string FormatZarr2DType(DType dtype, bool big_endian) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  if (!info.zarr2_has_byte_order) return std::string(info.zarr2_name);
  std::string out(1, info.size == 1 ? '|' : (big_endian ? '>' : '<'));
  out += info.zarr2_name;
  return out;
}

void SwapEndianInPlace(uint8_t* data, size_t num_bytes, size_t swap_unit) {
  if (swap_unit <= 1) return;
  for (size_t i = 0; i + swap_unit <= num_bytes; i += swap_unit) {
    uint8_t* p = data + i;
    for (size_t a = 0, b = swap_unit - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
  }
}

std::vector<uint8_t> EncodeFloat(DType dtype, double value) {
  std::vector<uint8_t> out(DTypeSize(dtype));
  if (dtype == DType::kFloat64) {
    std::memcpy(out.data(), &value, 8);
  } else if (dtype == DType::kFloat32) {
    float f = static_cast<float>(value);  // round-to-nearest-even, overflow to inf
    std::memcpy(out.data(), &f, 4);
  } else {
    const SmallFloat f = SmallFloatFormat(dtype);
    if (f.total_bits != 0) StoreBits(EncodeSmall(f, value), out.size(), out.data());
  }
  return out;
}

double DecodeFloat(DType dtype, const uint8_t* element) {
  if (dtype == DType::kFloat64) {
    double d;
    std::memcpy(&d, element, 8);
    return d;
  }
  if (dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, element, 4);
    return f;
  }
  const SmallFloat f = SmallFloatFormat(dtype);
  if (f.total_bits == 0) return std::numeric_limits<double>::quiet_NaN();
  return DecodeSmall(f, LoadBits(element, DTypeSize(dtype)));
}

std::vector<uint8_t> DefaultNaN(DType dtype) {
  std::vector<uint8_t> out(DTypeSize(dtype));
  if (dtype == DType::kFloat64) {
    StoreBits(0, 4, out.data());
    StoreBits(0x7ff80000u, 4, out.data() + 4);
  } else if (dtype == DType::kFloat32) {
    StoreBits(0x7fc00000u, 4, out.data());
  } else {
    const SmallFloat f = SmallFloatFormat(dtype);
    if (f.total_bits != 0) StoreBits(SmallNaN(f, false), out.size(), out.data());
  }
  return out;
}

bool HasInfinity(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kComplex64:
    case DType::kComplex128:
    case DType::kFloat8E3M4:
    case DType::kFloat8E5M2:
      return true;
    default:
      return false;
  }
}

}  // namespace cairn
