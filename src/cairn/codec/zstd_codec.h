// The zarr v3 `zstd` codec and the zarr v2 `zstd` compressor (bytes ->
// bytes): one Zstandard frame. Configuration `{"checksum": bool, "level": L}`;
// `level` is required when parsing stored metadata, `checksum` defaults to
// false. With checksum the frame carries a content checksum (XXH64), which
// the decoder verifies.
//
// A codec made `stored` writes its frames without compressing: raw blocks
// (RFC 8878 section 3.1.1.2, Block_Type 0) and the content checksum, so a
// zarr v2 array saved with compression "none" still carries a checksum
// every zstd decoder (TensorStore, numcodecs) verifies. `stored` changes
// only the encoder: the metadata still says zstd at `level`.
//
// Decoding never allocates more than the caller's bound: a frame declaring a
// content size above it is DataLoss before any allocation, and frames
// without a declared size are decoded in steps that stop at the bound.
// Compression and decompression contexts are reused per thread.
//
// Thread safety: immutable; all methods may be called concurrently.
#pragma once

#include <memory>

#include "cairn/codec/codec.h"

namespace cairn {

class ZstdCodec final : public BytesCodec {
 public:
  // REQUIRES: level within ZSTD_minCLevel()..ZSTD_maxCLevel() (FromJson checks).
  ZstdCodec(int level, bool checksum, bool stored = false)
      : level_(level), checksum_(checksum || stored), stored_(stored) {}

  // InvalidArgument when `level` is missing or out of range, or a member is
  // of the wrong type or unknown.
  static Result<std::shared_ptr<const ZstdCodec>> FromJson(const Json* configuration);

  std::string_view name() const override { return "zstd"; }
  Json ToJson() const override;

  Result<Buffer> Encode(ByteView decoded) const override;
  using BytesCodec::Decode;
  Result<Buffer> Decode(ByteView encoded, uint64_t max_decoded_size) const override;
  // Decompresses straight into `out`; a frame that declares or yields any
  // other size is DataLoss.
  Status DecodeInto(ByteView encoded, MutableByteView out) const override;
  uint64_t MaxEncodedSize(uint64_t decoded_size) const override;

  int level() const { return level_; }
  bool checksum() const { return checksum_; }
  bool stored() const { return stored_; }

  // One zstd frame holding `content` in raw blocks, with its content size
  // and checksum (low 4 bytes of XXH64).
  static Buffer EncodeStoredFrame(ByteView content);

 private:
  int level_;
  bool checksum_;
  bool stored_;
};

// Validates a zstd compression level (the range libzstd accepts).
Status CheckZstdLevel(int64_t level, std::string_view what);

}  // namespace cairn
