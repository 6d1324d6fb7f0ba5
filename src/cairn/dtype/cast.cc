#include "cairn/dtype/cast.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace cairn {
namespace {

bool IsRealFloat(DType d) { return GetDTypeInfo(d).kind == DTypeKind::kFloat; }

// bfloat16 is the top half of a float32; round to nearest even, NaN stays a
// (quiet) NaN.
void Float32ToBFloat16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &src[i], 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      dst[i] = static_cast<uint16_t>((bits >> 16) | 0x40);
      continue;
    }
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    dst[i] = static_cast<uint16_t>((bits + rounding) >> 16);
  }
}

void BFloat16ToFloat32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&dst[i], &bits, 4);
  }
}

}  // namespace

bool CanCast(DType from, DType to) {
  return from == to || (IsRealFloat(from) && IsRealFloat(to));
}

Status CastElements(DType from, const void* src, DType to, void* dst, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * DTypeSize(from));
    return Status::OK();
  }
  if (!CanCast(from, to)) {
    return Status(StatusCode::kInvalidArgument, "cannot cast " + std::string(DTypeName(from)) +
                                                    " to " + std::string(DTypeName(to)) +
                                                    ": only casts between float types are supported");
  }
  if (from == DType::kFloat32 && to == DType::kBFloat16) {
    Float32ToBFloat16(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
    return Status::OK();
  }
  if (from == DType::kBFloat16 && to == DType::kFloat32) {
    BFloat16ToFloat32(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
    return Status::OK();
  }
  // Through double: exact for every source type, one rounding to the target.
  const size_t in = DTypeSize(from), out = DTypeSize(to);
  const uint8_t* s = static_cast<const uint8_t*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t> e = EncodeFloat(to, DecodeFloat(from, s + i * in));
    std::memcpy(d + i * out, e.data(), out);
  }
  return Status::OK();
}

}  // namespace cairn
