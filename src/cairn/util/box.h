// Boxes (origin + shape in index space) and strided copies between arrays.
//
// Thread safety: pure functions and value types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cairn {

using Index = int64_t;
using Shape = std::vector<Index>;

// A half-open box [origin, origin + shape) in N-d index space.
struct Box {
  std::vector<Index> origin;
  Shape shape;

  Box() = default;
  Box(std::vector<Index> origin, Shape shape) : origin(std::move(origin)), shape(std::move(shape)) {}
  // The box [0, shape).
  static Box FromShape(Shape shape) {
    std::vector<Index> zero(shape.size(), 0);
    return Box(std::move(zero), std::move(shape));
  }

  size_t rank() const { return shape.size(); }
  // Number of elements; 1 for rank 0. REQUIRES: shape entries >= 0.
  Index num_elements() const;
  bool empty() const { return num_elements() == 0; }
  // True when `inner` lies within this box. REQUIRES: same rank.
  bool Contains(const Box& inner) const;
  bool operator==(const Box& o) const { return origin == o.origin && shape == o.shape; }
  // "[0:4, 8:16]" style, for error messages.
  std::string ToString() const;
};

// The intersection of two boxes of equal rank (possibly empty: some shape 0).
Box Intersect(const Box& a, const Box& b);

// Product of `shape`; 1 for rank 0. Returns nullopt on overflow of int64.
std::optional<Index> CheckedNumElements(std::span<const Index> shape);
Index NumElements(std::span<const Index> shape);

// Byte strides of a C-order (row-major) array of `shape` with `elem_size`.
std::vector<Index> CStrides(std::span<const Index> shape, size_t elem_size);
// Byte strides of an F-order (column-major) array.
std::vector<Index> FStrides(std::span<const Index> shape, size_t elem_size);

// Copies a `shape`-sized block of `elem_size`-byte elements from `src` to
// `dst`, each addressed by a base pointer and per-dimension byte strides
// (which may be negative or zero for src broadcasting). Contiguous runs are
// copied with memcpy. REQUIRES: strides have shape.size() entries; the
// regions do not overlap.
void StridedCopy(const void* src, std::span<const Index> src_byte_strides, void* dst,
                 std::span<const Index> dst_byte_strides, std::span<const Index> shape,
                 size_t elem_size);

// Copies the intersection of `src_box` and `dst_box` between two C-order
// arrays laid out over those boxes.
void CopyBoxIntersection(const void* src, const Box& src_box, void* dst, const Box& dst_box,
                         size_t elem_size);

// Fills a C-order array with copies of one element.
void FillWithElement(void* dst, size_t num_elements, const void* elem, size_t elem_size);

}  // namespace cairn
