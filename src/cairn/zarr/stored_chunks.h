// The chunks of an array that are actually stored, found by listing the
// array's keys once: what `cairn verify` (every format) checks. Its work and
// memory are bounded by the keys stored, never by the chunk count the
// metadata declares (a 600-byte zarr.json may declare 2^60 chunks).
//
// Missing chunks are never enumerated one by one: the first few are named
// (for a report), the rest are counted and described as row-major ranges
// of the grid (the gaps between stored chunks, at most one more than the
// number stored).
//
// Thread safety: pure functions over the store.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/util/box.h"
#include "cairn/zarr/metadata.h"

namespace cairn {

using GridCell = std::vector<Index>;

// Chunks per dimension: ceil(shape / chunk_shape); rank 0: no dimension
// (one chunk).
Shape ChunkGrid(const ArrayMetadata& md);
// Cells of `grid`, saturating at UINT64_MAX.
uint64_t GridCells(const Shape& grid);

// The grid cell `key` (relative to the array's prefix) names under the
// array's chunk key encoding; nullopt for any other key (metadata files,
// stray keys, cells outside the grid, non-canonical numbers like "01").
std::optional<GridCell> CellOfChunkKey(const ArrayMetadata& md, std::string_view key);

// One run of missing cells, both ends included, in row-major order.
struct MissingRange {
  GridCell first, last;
  uint64_t count = 0;  // saturating
};

struct StoredChunks {
  Shape grid;
  uint64_t cells = 0;           // GridCells(grid)
  std::vector<GridCell> stored;  // cells with a stored chunk, row-major
  // Cells without a chunk: cells - stored.size().
  uint64_t missing() const { return cells - stored.size(); }
};

// Lists the keys under `prefix` (the array's prefix in `store`, "" or
// ending in '/') once and keeps those naming a chunk of the grid.
Result<StoredChunks> ListStoredChunks(KvStore& store, const std::string& prefix, const ArrayMetadata& md);

// The first `max_cells` missing cells in row-major order (fewer when fewer
// are missing). Work: O(stored + max_cells) cells visited.
std::vector<GridCell> FirstMissingCells(const StoredChunks& chunks, size_t max_cells);

// The runs of missing cells (the gaps between stored cells), the first
// `max_ranges` of them in row-major order; `total_ranges` (when not null)
// gets how many there are.
std::vector<MissingRange> MissingRanges(const StoredChunks& chunks, size_t max_ranges,
                                        size_t* total_ranges = nullptr);

// "N of M chunks are missing (row-major ranges c/0/5..c/0/9, c/2/0..c/3/7,
// and K more ranges)" with keys formatted by the array's encoding.
std::string DescribeMissing(const StoredChunks& chunks, const ArrayMetadata& md, size_t max_ranges = 8);

}  // namespace cairn
