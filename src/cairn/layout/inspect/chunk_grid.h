// The grid of stored chunks (shards) of an array, walked cell by cell.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "cairn/util/box.h"
#include "cairn/zarr/metadata.h"
#include "cairn/zarr/stored_chunks.h"

namespace cairn::inspect {

// Chunks per dimension and their count: zarr/stored_chunks.h's, under the
// names the inspect code uses.
inline Shape ChunkGridShape(const ArrayMetadata& md) { return ChunkGrid(md); }
inline uint64_t NumCells(const Shape& grid) { return GridCells(grid); }

// Advances `cell` to the next cell of `grid` in row-major order; false
// after the last one. REQUIRES: cell.size() == grid.size().
inline bool NextGridCell(std::vector<Index>& cell, const Shape& grid) {
  for (size_t d = grid.size(); d-- > 0;) {
    if (++cell[d] < grid[d]) return true;
    cell[d] = 0;
  }
  return false;
}

// The box of `cell` clipped to the array's shape.
inline Box CellBoxInArray(const std::vector<Index>& cell, const ArrayMetadata& md) {
  Box b;
  b.origin.resize(cell.size());
  b.shape.resize(cell.size());
  for (size_t d = 0; d < cell.size(); ++d) {
    b.origin[d] = cell[d] * md.chunk_shape[d];
    const Index end = b.origin[d] + md.chunk_shape[d];
    b.shape[d] = (end < md.shape[d] ? end : md.shape[d]) - b.origin[d];
  }
  return b;
}

}  // namespace cairn::inspect
