// Stored chunks passed along as stored: a chunk of one zarr array whose
// stored bytes another array reads as the same values (the same dtype and
// chunk shape, and a codec chain that stores the C-order little-endian
// bytes as one zstd frame or raw, in zarr v3 or as a v2 compressor), so a
// converter copies it without decoding and encoding it again.
//
// Thread safety: pure functions, plus the KvStore calls they make.
#pragma once

#include <optional>
#include <string>

#include "cairn/util/box.h"
#include "cairn/util/buffer.h"
#include "cairn/zarr/array.h"

namespace cairn {

// The stored bytes of one chunk: `bytes` as read, of which [offset,
// offset + size) is the chunk (an inner chunk of a shard sits inside it).
struct StoredChunk {
  Buffer bytes;
  size_t offset = 0;
  size_t size = 0;
  ByteView view() const { return bytes.view().subspan(offset, size); }
};

// What the stored bytes of a chunk of `metadata` are, as a string that is
// equal for two arrays exactly when one's stored chunks are valid chunks
// of the other: "zstd float32 [64, 1024]" (one zstd frame of the C-order
// little-endian elements), "raw float32 [64, 1024]" (those bytes). A shard
// of one inner chunk counts as that inner chunk. Empty when the chain is
// anything else (transposes, other compressors, checksums, shards of several
// inner chunks, a big-endian bytes codec): such chunks are not passed along.
std::string StoredChunkForm(const ArrayMetadata& metadata);

// The stored bytes of the chunk `box` (exactly one chunk of the grid,
// wholly inside the array), without decoding them. nullopt when `box` is
// not one such chunk, StoredChunkForm is empty, the chunk is missing, or
// its bytes fail the cheap checks (raw: the chunk's size; zstd: exactly
// one frame that declares the chunk's size): the caller then reads and
// decodes, and reports damage. DataLoss for a shard whose index is
// damaged. Errors name the key.
Result<std::optional<StoredChunk>> ReadStoredChunk(const ZarrArray& array, const Box& box);

// Stores `stored` (bytes of StoredChunkForm(array.metadata()) for the chunk
// `box`) as the chunk `box` of `array`. InvalidArgument when `box` is not
// one chunk of its grid, wholly inside the array, or the form is empty, or
// not a sharded one (a shard would need its index written too).
Status WriteStoredChunk(const ZarrArray& array, const Box& box, ByteView stored);

}  // namespace cairn
