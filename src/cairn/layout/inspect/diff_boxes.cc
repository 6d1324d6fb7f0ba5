#include "cairn/layout/inspect/diff_boxes.h"

#include <algorithm>

namespace cairn::inspect {
namespace {

// Adds the cells of `grid` (boxes of `box`) that the stored chunk `cell`
// (chunks of `chunk`) overlaps.
void AddOverlapped(const GridCell& cell, const Shape& chunk, const Shape& shape, const Shape& box,
                   std::vector<GridCell>& out) {
  const size_t rank = shape.size();
  GridCell lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    const Index begin = cell[d] * chunk[d];  // < shape[d]: the cell is in the grid
    const Index last = begin + std::min(chunk[d], shape[d] - begin) - 1;
    lo[d] = begin / box[d];
    hi[d] = last / box[d];
  }
  GridCell cur = lo;
  while (true) {
    out.push_back(cur);
    size_t d = rank;
    for (; d > 0; --d) {
      if (++cur[d - 1] <= hi[d - 1]) break;
      cur[d - 1] = lo[d - 1];
    }
    if (d == 0) return;  // every dimension wrapped (rank 0: the one cell)
  }
}

uint64_t Elements(const Shape& shape) {
  unsigned __int128 n = 1;
  for (Index s : shape) {
    n *= static_cast<uint64_t>(std::max<Index>(s, 0));
    if (n > UINT64_MAX) return UINT64_MAX;
  }
  return static_cast<uint64_t>(n);
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? "," : "") + std::to_string(shape[d]);
  return s + "]";
}

}  // namespace

Shape CompareBoxShape(const Shape& shape, const Shape& chunk_a, const Shape& chunk_b, size_t elem) {
  const size_t rank = shape.size();
  Shape box;
  if (chunk_a.size() == rank && chunk_b.size() == rank) {
    box.resize(rank);
    for (size_t d = 0; d < rank; ++d) box[d] = std::max(chunk_a[d], chunk_b[d]);
  } else if (chunk_a.size() == rank) {
    box = chunk_a;
  } else if (chunk_b.size() == rank) {
    box = chunk_b;
  } else {
    box = shape;
  }
  for (size_t d = 0; d < rank; ++d) box[d] = std::clamp<Index>(box[d], 1, std::max<Index>(shape[d], 1));
  auto bytes = [&] {
    unsigned __int128 n = elem;
    for (Index c : box) n *= static_cast<uint64_t>(c);
    return n;
  };
  for (size_t d = 0; d < rank && bytes() > kMaxCompareBytes; ++d) {
    while (box[d] > 1 && bytes() > kMaxCompareBytes) box[d] = (box[d] + 1) / 2;
  }
  return box;
}

Shape CompareGrid(const Shape& shape, const Shape& box) {
  Shape grid(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    grid[d] = shape[d] <= 0 ? 0 : shape[d] / box[d] + (shape[d] % box[d] != 0);
  }
  return grid;
}

Box CompareBox(const GridCell& cell, const Shape& shape, const Shape& box) {
  Box b;
  for (size_t d = 0; d < shape.size(); ++d) {
    const Index origin = cell[d] * box[d];
    b.origin.push_back(origin);
    b.shape.push_back(std::min(box[d], shape[d] - origin));
  }
  return b;
}

Result<uint64_t> UnlistedCompareBoxes(const std::string& path, const Shape& shape,
                                      const Shape& box, const std::string& unlisted) {
  const uint64_t boxes = GridCells(CompareGrid(shape, box));
  if (boxes <= kMaxUnlistedCompareBoxes) return boxes;
  return ResourceExhaustedError(
      "diff: array `" + path + "` would be compared in " +
      (boxes == UINT64_MAX ? "more than " : "") + std::to_string(boxes) + " boxes of " +
      ShapeToString(box) + " (shape " + ShapeToString(shape) + "), and " + unlisted +
      " cannot list its stored chunks to skip the empty ones; refusing more than " +
      std::to_string(kMaxUnlistedCompareBoxes) + " boxes");
}

CompareCells TouchedCompareCells(const Shape& shape, const Shape& box, const StoredChunks& a,
                                 const Shape& chunk_a, const StoredChunks& b, const Shape& chunk_b) {
  CompareCells out;
  out.grid = CompareGrid(shape, box);
  const uint64_t total = Elements(shape);
  if (total == 0) return out;
  for (const GridCell& cell : a.stored) AddOverlapped(cell, chunk_a, shape, box, out.touched);
  for (const GridCell& cell : b.stored) AddOverlapped(cell, chunk_b, shape, box, out.touched);
  std::sort(out.touched.begin(), out.touched.end());  // lexicographic == row-major
  out.touched.erase(std::unique(out.touched.begin(), out.touched.end()), out.touched.end());
  uint64_t touched_elements = 0;
  for (const GridCell& cell : out.touched) {
    touched_elements += Elements(CompareBox(cell, shape, box).shape);
  }
  out.untouched_elements = total - std::min(total, touched_elements);
  if (out.untouched_elements > 0) {
    // The compare grid as chunks, its touched cells as the stored ones.
    StoredChunks grid;
    grid.grid = out.grid;
    grid.cells = GridCells(out.grid);
    grid.stored = std::move(out.touched);
    std::vector<GridCell> first = FirstMissingCells(grid, 1);
    if (!first.empty()) out.first_untouched = std::move(first.front());
    out.touched = std::move(grid.stored);
  }
  return out;
}

}  // namespace cairn::inspect
