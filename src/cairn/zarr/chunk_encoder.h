// Chunk encoder: one chunk of data in, (key, stored bytes) out.
//
// The pure half of ZarrArray::Write, for writers that stream chunks from
// memory they own into a store of their choosing (the engine's save
// pipeline): no store is read or written, nothing is staged. The input is
// the in-bounds part of the chunk at grid position `cell` (the chunk's box
// clipped to the array's shape), C-contiguous; the edge of the chunk beyond
// the array is padded with the fill value, as TensorStore stores it.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "cairn/util/buffer.h"
#include "cairn/result.h"
#include "cairn/zarr/metadata.h"

namespace cairn {

struct EncodedChunk {
  std::string key;  // relative to the array's prefix ("c/0/1", "0.1")
  // What to store: `bytes`, or — when `as_is` — the caller's input itself
  // (an identity codec chain and a whole in-bounds chunk: no copy made).
  Buffer bytes;
  bool as_is = false;
  // The chunk equals the fill value and fill chunks are not stored: nothing
  // to write (a reader sees the fill value).
  bool omit = false;
};

// The box of grid cell `cell`, clipped to the array's shape.
Box ChunkValidBox(const ArrayMetadata& metadata, std::span<const Index> cell);

// Encodes the chunk at `cell` from `valid_data` (C-order over
// ChunkValidBox's shape, native-endian elements). `store_fill`: keep chunks
// equal to the fill value (Orbax sets it). InvalidArgument when the input
// has the wrong size or the cell is outside the grid.
Result<EncodedChunk> EncodeChunk(const ArrayMetadata& metadata, std::span<const Index> cell,
                                 ByteView valid_data, bool store_fill);

}  // namespace cairn
