// The envelope shared by every encoded OCDBT object (manifest, version-tree
// node, B+tree node):
//
//   uint32be magic | uint64le length | varint format_version (0) |
//   varint compression (0 none, 1 zstd) | body (raw, or ONE zstd frame) |
//   uint32le crc32c of everything before it
//
// Pure functions: no I/O, no threads.
#pragma once

#include <cstdint>
#include <string_view>

#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn::ocdbt {

inline constexpr uint32_t kManifestMagic = 0x0CDB3A2A;
inline constexpr uint32_t kVersionTreeNodeMagic = 0x0CDB1234;
inline constexpr uint32_t kBtreeNodeMagic = 0x0CDB20DE;

// Decompressed bodies larger than this are rejected as corrupt.
inline constexpr uint64_t kMaxDecodedObjectBytes = uint64_t{1} << 32;

enum class CompressionMethod : uint8_t { kNone = 0, kZstd = 1 };

struct CompressionOptions {
  CompressionMethod method = CompressionMethod::kZstd;
  int32_t zstd_level = 0;  // 0 = zstd's default
};

// Wraps `body` in an envelope with `magic`. Errors: Internal if zstd fails.
Result<Buffer> EncodeEnvelope(uint32_t magic, ByteView body, const CompressionOptions& options);

// Verifies the envelope of `encoded` (the object's exact bytes) and returns
// the decompressed body. Errors: DataLoss naming `what` for a wrong magic,
// length, version, compression, CRC, a zstd stream that is not exactly one
// frame, or a body over `max_body_bytes` (at most kMaxDecodedObjectBytes);
// decompression stops as soon as the output passes the limit.
Result<Buffer> DecodeEnvelope(uint32_t magic, ByteView encoded, std::string_view what,
                              uint64_t max_body_bytes = kMaxDecodedObjectBytes);

}  // namespace cairn::ocdbt
