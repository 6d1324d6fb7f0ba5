// The zarr v3 `crc32c` codec (bytes -> bytes): appends the CRC-32C of the
// input as a little-endian uint32. Decoding verifies and strips it; a
// mismatch is DataLoss "crc32c mismatch: stored 0x..., computed 0x...".
// No configuration: written as `{"name":"crc32c"}`.
//
// Thread safety: stateless; all methods may be called concurrently.
#pragma once

#include <memory>

#include "cairn/codec/codec.h"

namespace cairn {

class Crc32cCodec final : public BytesCodec {
 public:
  // InvalidArgument if `configuration` is present and not an empty object.
  static Result<std::shared_ptr<const Crc32cCodec>> FromJson(const Json* configuration);

  std::string_view name() const override { return "crc32c"; }
  Json ToJson() const override { return {{"name", "crc32c"}}; }

  Result<Buffer> Encode(ByteView decoded) const override;
  using BytesCodec::Decode;
  Result<Buffer> Decode(ByteView encoded, uint64_t max_decoded_size) const override;
  uint64_t MaxEncodedSize(uint64_t decoded_size) const override { return decoded_size + 4; }

  // Checks the trailing checksum of `encoded` without copying; returns the
  // payload (a view into `encoded`).
  static Result<ByteView> Verify(ByteView encoded);
  // Copies the payload of `encoded` into `out` (REQUIRES nothing: a size
  // that differs is DataLoss) and checks its checksum in the same pass,
  // block by block while each block is in cache: one pass over memory
  // instead of two. `out` holds the payload even when the checksum differs.
  static Status CopyVerified(ByteView encoded, MutableByteView out);
};

}  // namespace cairn
