// The boxes `cairn diff` (diff.h) compares an array in.
//
// An array is compared box by box over a grid of boxes that holds both
// sides' chunks (per dimension the larger chunk extent, halved until a box
// holds at most kMaxCompareBytes). When both sides can list their stored
// chunks (zarr/stored_chunks.h), only the boxes overlapping a chunk stored
// on either side are read: the rest of the array is stored on neither side
// and holds each side's fill value, so it is compared once, one element
// standing for all of them. The work is then bounded by the chunks stored,
// never by the declared shape (a 600-byte zarr.json may declare 2^60
// chunks). A side that cannot list its chunks is read box by box over the
// whole grid; more than kMaxUnlistedCompareBoxes boxes are refused.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cairn/util/box.h"
#include "cairn/result.h"
#include "cairn/zarr/stored_chunks.h"

namespace cairn::inspect {

// A box compared at once holds at most this many bytes per side.
inline constexpr uint64_t kMaxCompareBytes = uint64_t{64} << 20;
// The most boxes an array is compared in when a side cannot list its
// stored chunks (2^22: 256 TiB in boxes of 64 MiB, or 4M small chunks).
inline constexpr uint64_t kMaxUnlistedCompareBoxes = uint64_t{1} << 22;

// The box shape an array of `shape` is compared in: per dimension the larger
// of the two chunk shapes (one whose rank is not the array's is ignored; the
// whole shape when neither fits), halved from the first dimension on until
// a box of `elem`-byte elements holds at most kMaxCompareBytes. Every
// extent is at least 1.
Shape CompareBoxShape(const Shape& shape, const Shape& chunk_a, const Shape& chunk_b, size_t elem);

// Boxes of `box` over `shape` per dimension (rank 0: none, one cell).
Shape CompareGrid(const Shape& shape, const Shape& box);

// The box of grid cell `cell`, clipped at the array's end.
Box CompareBox(const GridCell& cell, const Shape& shape, const Shape& box);

// The number of boxes of `box` over `shape`, when a side cannot list its
// stored chunks and every box is read: ResourceExhausted naming array
// `path` and the side (`unlisted`, "B (safetensors)") beyond
// kMaxUnlistedCompareBoxes.
Result<uint64_t> UnlistedCompareBoxes(const std::string& path, const Shape& shape,
                                      const Shape& box, const std::string& unlisted);

struct CompareCells {
  Shape grid;                     // CompareGrid(shape, box)
  std::vector<GridCell> touched;  // row-major, unique: cells overlapping a stored chunk
  uint64_t untouched_elements = 0;          // elements outside them (saturating)
  std::optional<GridCell> first_untouched;  // the first cell outside them, if any
};

// The cells of the grid of `box` over `shape` that overlap a chunk stored
// on either side: `a` (chunks of shape `chunk_a`) or `b` (`chunk_b`).
// Work: each stored chunk times the cells it overlaps (a few, as a box
// holds a chunk of each side unless the chunk exceeds kMaxCompareBytes),
// plus sorting them.
CompareCells TouchedCompareCells(const Shape& shape, const Shape& box, const StoredChunks& a,
                                 const Shape& chunk_a, const StoredChunks& b, const Shape& chunk_b);

}  // namespace cairn::inspect
