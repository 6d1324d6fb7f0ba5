// Internals of ZarrArray: grid iteration, strided helpers, and reading /
// writing `sharding_indexed` shards with ranged reads. Not a public API.
//
// Thread safety: pure functions, plus the KvStore calls they make.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cairn/codec/codec.h"
#include "cairn/codec/sharding_codec.h"
#include "cairn/kvstore/kvstore.h"
#include "cairn/util/box.h"

namespace cairn::internal_zarr {

// Advances `cell` to the next position of the row-major grid [lo, hi]
// (inclusive). Returns false after the last one.
bool NextCell(std::vector<Index>& cell, std::span<const Index> lo, std::span<const Index> hi);

// The grid cells of `chunk_shape` that `box` (non-empty) touches: [lo, hi].
void CellRange(const Box& box, std::span<const Index> chunk_shape, std::vector<Index>& lo,
               std::vector<Index>& hi);

// `base` advanced by sum((pos[d] - origin[d]) * strides[d]).
uint8_t* Offset(uint8_t* base, std::span<const Index> pos, std::span<const Index> origin,
                std::span<const Index> strides);

// True if `strides` describe a C-contiguous array of `shape` (dimensions of
// extent 1 may have any stride).
bool IsCContiguous(std::span<const Index> strides, std::span<const Index> shape,
                   size_t elem_size);

// Writes `elem` into every element of a strided region.
void FillStrided(uint8_t* dst, std::span<const Index> dst_strides, std::span<const Index> shape,
                 const std::vector<uint8_t>& elem);

// The sharding codec when `chain` is exactly [sharding_indexed] (so the
// index and inner chunks can be fetched with ranged reads), else nullptr.
const ShardingCodec* TopLevelSharding(const CodecChain& chain);

// Reads the region `inter` (array coordinates) of the shard at `key` into
// `dst` (pointing at inter's first element, with `dst_strides`). The shard
// covers `shard_box`; `valid` is shard_box clipped to the array. Fetches
// the whole shard when `inter` == `valid`, else the index and then only the
// inner chunks `inter` touches. A missing shard or inner chunk reads as the
// fill value. DataLoss for a shard shorter than its index or an index entry
// past its end. Errors are not annotated with the key (the caller does it).
Status ReadShardRegion(KvStore& store, const std::string& key, const ShardingCodec& codec,
                       const ChunkSpec& shard_spec, const Box& shard_box, const Box& valid,
                       const Box& inter, uint8_t* dst, std::span<const Index> dst_strides);

// Encodes a whole shard (a C-order array of `shard_spec`) as TensorStore
// does: inner chunks wholly outside `valid` (the shard's in-bounds part,
// relative to the shard's origin) are left out, and so are inner chunks equal
// to the fill value unless `store_fill`. nullopt when no inner chunk remains
// (the shard is then deleted, not stored).
Result<std::optional<Buffer>> EncodeShard(const ShardingCodec& codec, const ChunkSpec& shard_spec,
                                          ByteView shard_array, const Box& valid,
                                          bool store_fill);

}  // namespace cairn::internal_zarr
