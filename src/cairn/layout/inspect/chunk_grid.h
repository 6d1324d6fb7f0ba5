// The grid of stored chunks (shards) of an array, walked cell by cell.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "cairn/util/box.h"
#include "cairn/zarr/metadata.h"

namespace cairn::inspect {

// Chunks per dimension: ceil(shape / chunk_shape); a rank-0 array has one.
inline Shape ChunkGridShape(const ArrayMetadata& md) {
  Shape grid(md.shape.size());
  for (size_t d = 0; d < grid.size(); ++d) {
    const Index c = md.chunk_shape[d] > 0 ? md.chunk_shape[d] : 1;
    grid[d] = md.shape[d] <= 0 ? 0 : (md.shape[d] + c - 1) / c;
  }
  return grid;
}

// Number of cells of `grid` (saturating at UINT64_MAX).
inline uint64_t NumCells(const Shape& grid) {
  uint64_t n = 1;
  for (Index g : grid) {
    if (g <= 0) return 0;
    if (n > UINT64_MAX / static_cast<uint64_t>(g)) return UINT64_MAX;
    n *= static_cast<uint64_t>(g);
  }
  return n;
}

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
