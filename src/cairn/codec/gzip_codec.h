// Deflate-based bytes -> bytes codecs, both through zlib:
//  - zarr v3 `gzip` (and zarr v2 compressor `gzip`): one RFC 1952 gzip
//    member. Configuration `{"level": L}`, L in 0..9, required when parsing.
//  - zarr v2 compressor `zlib`: an RFC 1950 zlib stream (no v3 name; its
//    name() is "zlib" and ToJson gives the v2 compressor object).
//
// The decoder accepts exactly one member/stream (trailing bytes are
// DataLoss), checks its CRC-32/Adler-32, and stops at the caller's bound.
//
// Thread safety: immutable; all methods may be called concurrently.
#pragma once

#include <memory>

#include "cairn/codec/codec.h"

namespace cairn {

class DeflateCodec final : public BytesCodec {
 public:
  enum class Format : uint8_t { kGzip, kZlib };

  // REQUIRES: 0 <= level <= 9 (FromJson checks).
  DeflateCodec(Format format, int level) : format_(format), level_(level) {}

  // Parses a zarr v3 gzip `configuration`. InvalidArgument when `level` is
  // missing, not an integer in 0..9, or other members are present.
  static Result<std::shared_ptr<const DeflateCodec>> GzipFromJson(const Json* configuration);

  std::string_view name() const override { return format_ == Format::kGzip ? "gzip" : "zlib"; }
  // gzip: `{"configuration":{"level":L},"name":"gzip"}`; zlib: the zarr v2
  // compressor `{"id":"zlib","level":L}`.
  Json ToJson() const override;

  Result<Buffer> Encode(ByteView decoded) const override;
  using BytesCodec::Decode;
  Result<Buffer> Decode(ByteView encoded, uint64_t max_decoded_size) const override;
  uint64_t MaxEncodedSize(uint64_t decoded_size) const override;

  Format format() const { return format_; }
  int level() const { return level_; }

 private:
  Format format_;
  int level_;
};

// Checks a deflate level (0..9).
Status CheckDeflateLevel(int64_t level, std::string_view what);

}  // namespace cairn
