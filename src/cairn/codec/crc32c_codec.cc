#include "cairn/codec/crc32c_codec.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

}  // namespace

Result<std::shared_ptr<const Crc32cCodec>> Crc32cCodec::FromJson(const Json* configuration) {
  if (configuration != nullptr) {
    CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*configuration, {}, "crc32c codec"));
  }
  return std::make_shared<const Crc32cCodec>();
}

Result<Buffer> Crc32cCodec::Encode(ByteView decoded) const {
  Buffer out(decoded.size() + 4);
  if (!decoded.empty()) std::memcpy(out.data(), decoded.data(), decoded.size());
  StoreLE32(out.data() + decoded.size(), Crc32c(decoded));
  return out;
}

Result<ByteView> Crc32cCodec::Verify(ByteView encoded) {
  if (encoded.size() < 4) {
    return DataLossError("crc32c codec: " + std::to_string(encoded.size()) +
                         " bytes is too short for a checksum");
  }
  ByteView payload = encoded.first(encoded.size() - 4);
  const uint32_t stored = LoadLE32(encoded.data() + payload.size());
  const uint32_t computed = Crc32c(payload);
  if (stored != computed) {
    return DataLossError("crc32c mismatch: stored " + Hex32(stored) + ", computed " +
                         Hex32(computed));
  }
  return payload;
}

Status Crc32cCodec::CopyVerified(ByteView encoded, MutableByteView out) {
  if (encoded.size() != out.size() + 4) {
    return DataLossError("crc32c codec: " + std::to_string(encoded.size()) + " bytes, expected " +
                         std::to_string(out.size()) + " and a 4-byte checksum");
  }
  constexpr size_t kBlock = 256 << 10;  // stays in L2 between the copy and the checksum
  uint32_t computed = Crc32c(ByteView());
  for (size_t at = 0; at < out.size(); at += kBlock) {
    const size_t n = std::min(kBlock, out.size() - at);
    std::memcpy(out.data() + at, encoded.data() + at, n);
    computed = Crc32cExtend(computed, ByteView(out.data() + at, n));
  }
  const uint32_t stored = LoadLE32(encoded.data() + out.size());
  if (stored != computed) {
    return DataLossError("crc32c mismatch: stored " + Hex32(stored) + ", computed " + Hex32(computed));
  }
  return Status::OK();
}

Result<Buffer> Crc32cCodec::Decode(ByteView encoded, uint64_t max_decoded_size) const {
  CAIRN_ASSIGN_OR_RETURN(ByteView payload, Verify(encoded));
  if (payload.size() > max_decoded_size) {
    return DataLossError("crc32c codec: " + std::to_string(payload.size()) +
                         " bytes, more than the " + std::to_string(max_decoded_size) +
                         " expected");
  }
  return Buffer::CopyOf(payload);
}

}  // namespace cairn
