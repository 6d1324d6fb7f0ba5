#include "cairn/zarr/fill_value.h"

#include "cairn/zarr/metadata.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace cairn {
namespace {

// The float dtype of one half of a complex dtype.
DType ComponentDType(DType dtype) {
  return dtype == DType::kComplex64 ? DType::kFloat32 : DType::kFloat64;
}

uint64_t LoadUnsigned(const uint8_t* p, size_t size) {
  uint64_t v = 0;
  for (size_t i = 0; i < size; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void StoreUnsigned(uint64_t v, uint8_t* p, size_t size) {
  for (size_t i = 0; i < size; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

std::pair<int64_t, uint64_t> IntRange(DType dtype, bool* is_signed) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  *is_signed = info.kind == DTypeKind::kSignedInt;
  if (dtype == DType::kInt2) return {-2, 1};
  if (dtype == DType::kInt4) return {-8, 7};
  const int bits = static_cast<int>(info.size * 8);
  if (*is_signed) {
    const int64_t lo = bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1));
    const uint64_t hi = bits == 64 ? uint64_t{INT64_MAX} : (uint64_t{1} << (bits - 1)) - 1;
    return {lo, hi};
  }
  return {0, bits == 64 ? UINT64_MAX : (uint64_t{1} << bits) - 1};
}

Status ParseInteger(const Json& j, DType dtype, uint8_t* out) {
  bool is_signed = false;
  const auto [lo, hi] = IntRange(dtype, &is_signed);
  const std::string expected = "fill_value: expected an integer in the range [" +
                               std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                               DumpJson(j);
  const size_t size = DTypeSize(dtype);
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > hi) return InvalidArgumentError(expected);
    StoreUnsigned(v, out, size);
    return Status::OK();
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < lo || (v >= 0 && static_cast<uint64_t>(v) > hi)) return InvalidArgumentError(expected);
    StoreUnsigned(static_cast<uint64_t>(v), out, size);
    return Status::OK();
  }
  if (j.is_number_float()) {
    const double d = j.get<double>();
    // hi is 2^k - 1, which a double may round up to 2^k (k = 63, 64), so
    // compare with the exact 2^k: 9223372036854775808.0 is out of int64's
    // range although it equals static_cast<double>(INT64_MAX). lo (0 or
    // -2^(k-1)) is exact.
    const double hi_exclusive = static_cast<double>(hi / 2 + 1) * 2.0;
    if (!std::isfinite(d) || std::floor(d) != d || d < static_cast<double>(lo) ||
        d >= hi_exclusive) {
      return InvalidArgumentError(expected);
    }
    if (d < 0) {
      StoreUnsigned(static_cast<uint64_t>(static_cast<int64_t>(d)), out, size);
    } else {
      StoreUnsigned(static_cast<uint64_t>(d), out, size);
    }
    return Status::OK();
  }
  return InvalidArgumentError(expected);
}

// float8_e8m0fnu has no zero. TensorStore's default fill value 0.0 is the byte
// 0x00 (2^-127), which it prints back as 0.0, and it maps every magnitude
// below float32's smallest normal to 0x00; follow it there (other values
// round as ml_dtypes does: tensorstore 0.1.86 mis-encodes e.g. 1.0 as 0x3f).
constexpr double kFloat32MinNormal = 1.1754943508222875e-38;  // 2^-126

void StoreFloat(DType dtype, double value, uint8_t* out) {
  if (dtype == DType::kFloat8E8M0FNU && std::fabs(value) < kFloat32MinNormal) {
    out[0] = 0x00;
    return;
  }
  const std::vector<uint8_t> bytes = EncodeFloat(dtype, value);
  std::memcpy(out, bytes.data(), DTypeSize(dtype));
}

// One float of `dtype` (a kFloat dtype) from JSON.
Status ParseFloat(const Json& j, DType dtype, ZarrFormat format, uint8_t* out) {
  const size_t size = DTypeSize(dtype);
  if (j.is_number()) {
    StoreFloat(dtype, j.get<double>(), out);
    return Status::OK();
  }
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "NaN") {
      const std::vector<uint8_t> nan = DefaultNaN(dtype);
      std::memcpy(out, nan.data(), size);
      return Status::OK();
    }
    if (s == "Infinity" || s == "-Infinity") {
      StoreFloat(dtype, s[0] == '-' ? -INFINITY : INFINITY, out);
      return Status::OK();
    }
    if (format == ZarrFormat::kV3) {
      if (s.size() >= 3 && s.size() <= 2 + 2 * size && s[0] == '0' && s[1] == 'x') {
        uint64_t v = 0;
        bool ok = true;
        for (size_t i = 2; i < s.size() && ok; ++i) {
          const char c = s[i];
          int d = -1;
          if (c >= '0' && c <= '9') d = c - '0';
          if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
          if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
          ok = d >= 0;
          v = (v << 4) | static_cast<uint64_t>(d);
        }
        if (ok) {
          StoreUnsigned(v, out, size);
          return Status::OK();
        }
      }
    } else if (!s.empty()) {
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (end == s.c_str() + s.size()) {
        StoreFloat(dtype, d, out);
        return Status::OK();
      }
    }
  }
  return InvalidArgumentError(
      "fill_value: expected a number, \"Infinity\", \"-Infinity\", \"NaN\"" +
      std::string(format == ZarrFormat::kV3 ? " or a hex string" : "") + " for " +
      std::string(DTypeName(dtype)) + ", got " + DumpJson(j));
}

Json FloatToJson(DType dtype, const uint8_t* element, ZarrFormat format) {
  if (dtype == DType::kFloat8E8M0FNU && element[0] == 0x00) return 0.0;  // see StoreFloat
  const double d = DecodeFloat(dtype, element);
  if (std::isnan(d)) {
    const size_t size = DTypeSize(dtype);
    const std::vector<uint8_t> nan = DefaultNaN(dtype);
    if (format == ZarrFormat::kV2 || std::memcmp(nan.data(), element, size) == 0) return "NaN";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%0*llx", static_cast<int>(2 * size),
                  static_cast<unsigned long long>(LoadUnsigned(element, size)));
    return std::string(buf);
  }
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return d;
}

Result<std::vector<uint8_t>> ParseFillValue(const Json& j, DType dtype, ZarrFormat format) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  std::vector<uint8_t> out(info.size, 0);
  switch (info.kind) {
    case DTypeKind::kBool:
      if (!j.is_boolean()) {
        return InvalidArgumentError("fill_value: expected a boolean, got " + DumpJson(j));
      }
      out[0] = j.get<bool>() ? 1 : 0;
      break;
    case DTypeKind::kSignedInt:
    case DTypeKind::kUnsignedInt:
      CAIRN_RETURN_IF_ERROR(ParseInteger(j, dtype, out.data()));
      break;
    case DTypeKind::kFloat:
      CAIRN_RETURN_IF_ERROR(ParseFloat(j, dtype, format, out.data()));
      break;
    case DTypeKind::kComplex: {
      if (!j.is_array() || j.size() != 2) {
        return InvalidArgumentError("fill_value: expected [real, imag] for " +
                                    std::string(info.name) + ", got " + DumpJson(j));
      }
      const DType part = ComponentDType(dtype);
      CAIRN_RETURN_IF_ERROR(ParseFloat(j[0], part, format, out.data()));
      CAIRN_RETURN_IF_ERROR(ParseFloat(j[1], part, format, out.data() + info.size / 2));
      break;
    }
  }
  return out;
}

Json FillValueToJson(DType dtype, const std::vector<uint8_t>& element, ZarrFormat format) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  const uint8_t* p = element.data();
  switch (info.kind) {
    case DTypeKind::kBool:
      return p[0] != 0;
    case DTypeKind::kSignedInt: {
      const uint64_t raw = LoadUnsigned(p, info.size);
      const int bits = static_cast<int>(info.size * 8);
      int64_t v = static_cast<int64_t>(raw << (64 - bits)) >> (64 - bits);
      if (dtype == DType::kInt4) v = static_cast<int64_t>(raw << 60) >> 60;
      if (dtype == DType::kInt2) v = static_cast<int64_t>(raw << 62) >> 62;
      return v;
    }
    case DTypeKind::kUnsignedInt:
      return LoadUnsigned(p, info.size);
    case DTypeKind::kFloat:
      return FloatToJson(dtype, p, format);
    case DTypeKind::kComplex: {
      const DType part = ComponentDType(dtype);
      return Json::array(
          {FloatToJson(part, p, format), FloatToJson(part, p + info.size / 2, format)});
    }
  }
  return nullptr;
}

}  // namespace

Result<std::vector<uint8_t>> ParseFillValueV3(const Json& j, DType dtype) {
  return ParseFillValue(j, dtype, ZarrFormat::kV3);
}

Json FillValueToJsonV3(DType dtype, const std::vector<uint8_t>& element) {
  return FillValueToJson(dtype, element, ZarrFormat::kV3);
}

Result<std::optional<std::vector<uint8_t>>> ParseFillValueV2(const Json& j, DType dtype) {
  if (j.is_null()) return std::optional<std::vector<uint8_t>>();
  CAIRN_ASSIGN_OR_RETURN(std::vector<uint8_t> v, ParseFillValue(j, dtype, ZarrFormat::kV2));
  return std::optional<std::vector<uint8_t>>(std::move(v));
}

Json FillValueToJsonV2(DType dtype, const std::vector<uint8_t>& element) {
  return FillValueToJson(dtype, element, ZarrFormat::kV2);
}

std::vector<uint8_t> ZeroElement(DType dtype) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  std::vector<uint8_t> zero(info.size, 0);
  if (info.kind == DTypeKind::kFloat) StoreFloat(dtype, 0.0, zero.data());
  return zero;
}

}  // namespace cairn
