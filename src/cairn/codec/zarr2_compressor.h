// zarr v2 `.zarray` `compressor` objects <-> BytesCodec instances.
//
// Accepted (and written back exactly as TensorStore writes them, keys
// sorted):
//   {"id":"zstd","level":L}            level default 1
//   cairn's own members of a zstd compressor, never in a stored `.zarray`
//   (the writer removes them): "checksum": true (frames carry their content
//   checksum) and "cairn_stored": true (frames of raw blocks, not
//   compressed, with the checksum: zstd_codec.h)
//   {"id":"zlib","level":L}            RFC 1950, level default 1
//   {"id":"gzip","level":L}            RFC 1952, level default 1
//   {"blocksize":B,"clevel":C,"cname":"lz4","id":"blosc","shuffle":S}
//       S: -1 auto (bitshuffle for 1-byte elements, else byte shuffle),
//       0 none, 1 byte, 2 bit; typesize = element size; defaults lz4, 5, -1, 0.
//   null                               no compressor
//
// Thread safety: pure functions; the result is immutable.
#pragma once

#include <memory>

#include "cairn/codec/codec.h"

namespace cairn {

inline constexpr const char* kZstdStoredMember = "cairn_stored";

struct Zarr2Compressor {
  // nullptr for `null` (chunks stored raw).
  std::shared_ptr<const BytesCodec> codec;
  // The normalized `compressor` member to write back (null for none).
  Json json;
};

// Parses a `compressor` value for an array of `dtype`. InvalidArgument for
// an unknown `id`, unknown members, or out-of-range parameters.
Result<Zarr2Compressor> ParseZarr2Compressor(const Json& compressor, DType dtype);

// The default compressor TensorStore uses when none is specified:
// blosc lz4, clevel 5, shuffle -1, blocksize 0.
Zarr2Compressor DefaultZarr2Compressor(DType dtype);

}  // namespace cairn
