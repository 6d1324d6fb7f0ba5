#include "cairn/zarr/stored_chunks.h"

#include <algorithm>

namespace cairn {
namespace {

// Advances `cell` to the next cell of `grid` in row-major order; false
// after the last one.
bool Next(GridCell& cell, const Shape& grid) {
  for (size_t d = grid.size(); d-- > 0;) {
    if (++cell[d] < grid[d]) return true;
    cell[d] = 0;
  }
  return false;
}

// The cell before `cell` (REQUIRES: not the first).
GridCell Prev(GridCell cell, const Shape& grid) {
  for (size_t d = grid.size(); d-- > 0;) {
    if (cell[d]-- > 0) return cell;
    cell[d] = grid[d] - 1;
  }
  return cell;
}

GridCell LastCell(const Shape& grid) {
  GridCell c(grid.size());
  for (size_t d = 0; d < grid.size(); ++d) c[d] = grid[d] - 1;
  return c;
}

// Row-major position of `cell`, saturating at UINT64_MAX.
uint64_t Linear(const GridCell& cell, const Shape& grid) {
  unsigned __int128 pos = 0;
  constexpr unsigned __int128 kMax = UINT64_MAX;
  for (size_t d = 0; d < grid.size(); ++d) {
    pos = pos * static_cast<uint64_t>(grid[d]) + static_cast<uint64_t>(cell[d]);
    if (pos > kMax) return UINT64_MAX;
  }
  return static_cast<uint64_t>(pos);
}

// A canonical non-negative decimal ("0", "12", not "012" or "+1").
std::optional<Index> ParseIndex(std::string_view s) {
  if (s.empty() || s.size() > 18 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  Index v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

Shape ChunkGrid(const ArrayMetadata& md) {
  Shape grid(md.shape.size());
  for (size_t d = 0; d < grid.size(); ++d) {
    const Index c = md.chunk_shape.size() > d && md.chunk_shape[d] > 0 ? md.chunk_shape[d] : 1;
    grid[d] = md.shape[d] <= 0 ? 0 : md.shape[d] / c + (md.shape[d] % c != 0);
  }
  return grid;
}

uint64_t GridCells(const Shape& grid) {
  uint64_t n = 1;
  for (Index g : grid) {
    if (g <= 0) return 0;
    if (n > UINT64_MAX / static_cast<uint64_t>(g)) return UINT64_MAX;
    n *= static_cast<uint64_t>(g);
  }
  return n;
}

std::optional<GridCell> CellOfChunkKey(const ArrayMetadata& md, std::string_view key) {
  const ChunkKeyEncoding& e = md.chunk_key_encoding;
  const size_t rank = md.shape.size();
  if (rank == 0) {
    if (key == e.FormatKey({})) return GridCell{};
    return std::nullopt;
  }
  if (e.kind == ChunkKeyEncoding::Kind::kDefault) {
    if (key.size() < 2 || key[0] != 'c' || key[1] != e.separator) return std::nullopt;
    key.remove_prefix(2);
  }
  const Shape grid = ChunkGrid(md);
  GridCell cell;
  cell.reserve(rank);
  while (true) {
    const size_t sep = key.find(e.separator);
    auto v = ParseIndex(key.substr(0, sep));
    if (!v || cell.size() == rank || *v >= grid[cell.size()]) return std::nullopt;
    cell.push_back(*v);
    if (sep == std::string_view::npos) break;
    key.remove_prefix(sep + 1);
  }
  if (cell.size() != rank) return std::nullopt;
  return cell;
}

Result<StoredChunks> ListStoredChunks(KvStore& store, const std::string& prefix, const ArrayMetadata& md) {
  StoredChunks out;
  out.grid = ChunkGrid(md);
  out.cells = GridCells(out.grid);
  if (out.cells == 0) return out;
  auto keys = store.List(prefix);
  if (!keys.ok()) return keys.status().Annotate("listing the chunks of " + store.Describe(prefix));
  for (const KeyInfo& k : *keys) {
    if (k.key.size() <= prefix.size() || k.key.compare(0, prefix.size(), prefix) != 0) continue;
    if (auto cell = CellOfChunkKey(md, std::string_view(k.key).substr(prefix.size()))) {
      out.stored.push_back(std::move(*cell));
    }
  }
  std::sort(out.stored.begin(), out.stored.end());  // lexicographic == row-major
  out.stored.erase(std::unique(out.stored.begin(), out.stored.end()), out.stored.end());
  return out;
}

std::vector<GridCell> FirstMissingCells(const StoredChunks& chunks, size_t max_cells) {
  std::vector<GridCell> out;
  if (chunks.cells == 0 || max_cells == 0) return out;
  GridCell cur(chunks.grid.size(), 0);
  size_t i = 0;
  do {
    if (i < chunks.stored.size() && chunks.stored[i] == cur) {
      ++i;
    } else {
      out.push_back(cur);
    }
  } while (out.size() < max_cells && Next(cur, chunks.grid));
  return out;
}

std::vector<MissingRange> MissingRanges(const StoredChunks& chunks, size_t max_ranges,
                                        size_t* total_ranges) {
  std::vector<MissingRange> out;
  size_t total = 0;
  if (chunks.cells > 0) {
    const Shape& grid = chunks.grid;
    // The gap before each stored cell, then the one after the last.
    uint64_t next_pos = 0;        // row-major position of the first cell not yet covered
    GridCell next(grid.size(), 0);  // that cell
    bool more = true;             // `next` is inside the grid
    auto gap = [&](uint64_t end_pos, const GridCell& end_cell, bool end_inside) {
      // Cells [next, end) are missing.
      if (!more || end_pos <= next_pos) return;
      ++total;
      if (out.size() < max_ranges) {
        out.push_back({next, end_inside ? Prev(end_cell, grid) : LastCell(grid), end_pos - next_pos});
      }
    };
    for (const GridCell& s : chunks.stored) {
      const uint64_t pos = Linear(s, grid);
      gap(pos, s, true);
      next = s;
      next_pos = pos == UINT64_MAX ? pos : pos + 1;
      more = Next(next, grid);
    }
    gap(chunks.cells, GridCell(), false);
  }
  if (total_ranges != nullptr) *total_ranges = total;
  return out;
}

std::string DescribeMissing(const StoredChunks& chunks, const ArrayMetadata& md, size_t max_ranges) {
  std::string s = std::to_string(chunks.missing()) + " of " +
                  (chunks.cells == UINT64_MAX ? "more than " : "") + std::to_string(chunks.cells) +
                  " chunks are missing";
  size_t total = 0;
  const std::vector<MissingRange> ranges = MissingRanges(chunks, max_ranges, &total);
  if (ranges.empty()) return s;
  s += " (row-major ranges: ";
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i) s += ", ";
    s += md.chunk_key_encoding.FormatKey(ranges[i].first);
    if (ranges[i].count > 1) s += ".." + md.chunk_key_encoding.FormatKey(ranges[i].last);
  }
  if (total > ranges.size()) s += ", and " + std::to_string(total - ranges.size()) + " more ranges";
  return s + ")";
}

}  // namespace cairn
