// Zarr v2 (`.zarray`) and v3 (`zarr.json`) array metadata: parsing,
// validation, defaults for partial metadata, and serialization exactly as
// TensorStore writes it (compact JSON, keys sorted).
//
// Both formats are represented by one `ArrayMetadata`. A v2 array's chunk
// encoding (order, byte order, compressor) is also expressed as an equivalent
// v3 codec chain in `codecs`, so readers and writers handle one kind of chain.
//
// Errors: InvalidArgument naming the offending member ("chunk_grid: ...").
// Nothing here allocates from unchecked sizes: shapes, chunk shapes and their
// products are checked for overflow before use.
//
// Thread safety: pure functions and value types.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cairn/codec/codec.h"
#include "cairn/dtype/dtype.h"
#include "cairn/util/box.h"
#include "cairn/util/json.h"

namespace cairn {

enum class ZarrFormat { kV2, kV3 };

// How chunk grid positions become keys (relative to the array prefix).
struct ChunkKeyEncoding {
  enum class Kind { kDefault, kV2 };
  Kind kind = Kind::kDefault;
  char separator = '/';  // '/' or '.'

  // "c/0/3" (default), "0.3" (v2); rank 0: "c" (default), "0" (v2).
  std::string FormatKey(std::span<const Index> cell) const;
};

// The largest chunk (or shard) cairn accepts, in bytes once decoded (the
// codecs' own decode bound): larger chunk shapes in metadata are rejected
// (InvalidArgument) rather than allocated.
inline constexpr int64_t kMaxChunkBytes = static_cast<int64_t>(kDefaultMaxDecodedBytes);

struct ArrayMetadata {
  ZarrFormat format = ZarrFormat::kV3;
  Shape shape;
  DType dtype = DType::kFloat32;
  // The stored chunk: the shard when the array is sharded.
  Shape chunk_shape;
  // One native-endian element. For v2 with `"fill_value": null` this is zero
  // bytes and `fill_value_is_null` is set (written back as null).
  std::vector<uint8_t> fill_value;
  bool fill_value_is_null = false;
  // The chain that turns a `chunk_shape` chunk into stored bytes (v2: the
  // equivalent chain: transpose for F order, bytes with the dtype's byte
  // order, then the compressor if any).
  CodecChain codecs;
  ChunkKeyEncoding chunk_key_encoding;
  // v3: null per unlabeled dimension; empty when the member is absent.
  std::vector<std::optional<std::string>> dimension_names;
  // v3 `attributes` (an object, or null when absent).
  Json attributes;
  // Members cairn does not interpret, preserved on rewrite (v3: each an
  // object with "must_understand": false; v2: anything).
  Json extra_members = Json::object();

  // v2 only.
  bool v2_fortran_order = false;
  bool v2_big_endian = false;
  Json v2_compressor;  // null or the compressor object as TensorStore writes it

  // The decoded layout of one stored chunk.
  ChunkSpec chunk_spec() const { return ChunkSpec{dtype, chunk_shape, fill_value}; }
  // The metadata document as JSON / as the exact stored text.
  Json ToJson() const;
  std::string ToJsonString() const { return DumpJson(ToJson()); }
  // The metadata key under the array prefix: "zarr.json" or ".zarray".
  const char* metadata_key() const { return format == ZarrFormat::kV3 ? "zarr.json" : ".zarray"; }
};

inline const char* MetadataKey(ZarrFormat f) {
  return f == ZarrFormat::kV3 ? "zarr.json" : ".zarray";
}

// The shape of the smallest independently readable chunk: the innermost
// `sharding_indexed` chunk_shape when the array is sharded (TensorStore's
// read_chunk), else chunk_shape.
Shape ReadChunkShape(const ArrayMetadata& metadata);

// Parses and validates a stored metadata document.
Result<ArrayMetadata> ParseArrayMetadata(ZarrFormat format, const Json& json);

// Builds complete metadata from partial metadata in the format's own JSON,
// filling what is missing with TensorStore's defaults: chunk shape chosen as
// TensorStore does (about 2^20 elements, each dimension at most the array's),
// fill value 0/false (v2: null), codecs `bytes` (little-endian) for v3 and a
// blosc lz4 compressor for v2, short codec specs completed (zstd level 3,
// gzip level 6, blosc defaults, sharding's codecs/index_codecs, a `bytes`
// codec inserted when none is given). `shape` and the dtype are required.
// Unknown members are InvalidArgument (v3: unless must_understand is false).
Result<ArrayMetadata> MetadataFromPartial(ZarrFormat format, const Json& partial);

// The default chunk shape TensorStore picks for `shape`: the largest edge x
// with prod(min(max(shape_d, 1), x)) <= 2^20.
Shape DefaultChunkShape(std::span<const Index> shape);

}  // namespace cairn
