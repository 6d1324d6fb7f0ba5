// Planning a conversion: which source arrays go where, under which name and
// dtype, and in which regions they are copied. Pure: no I/O.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cairn/layout/checkpoint_format.h"
#include "cairn/layout/path_rules.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn::engine {

// A leading `from` of a destination path becomes `to` (with `suffix`: a
// trailing `from` does): layout/path_rules.h.
using RenameRule = layout::RenameRule;

// Arrays whose source path matches `glob` are cast to `dtype`.
struct CastRule {
  std::string glob;
  DType dtype;
};

struct ArrayMapping;

struct ConvertPlanOptions {
  // fnmatch(3) globs on source paths ('*' also matches '.' and '/'). An
  // array is kept when it matches some include (or includes are empty) and
  // no exclude.
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  // Destination paths join the tree keys with this ('.' for Orbax and
  // safetensors, '/' for AXLearn), then the first matching rename applies.
  char dest_separator = '.';
  std::vector<RenameRule> renames;
  // Keep only the model parameters of a training state: arrays whose tree
  // path starts with the key `params` (a flax TrainState's field), which is
  // dropped from the destination path, and so is a second `params` (MaxText
  // keeps the whole flax variables dict there: `params.params.decoder...`).
  // Sources without tree paths (safetensors) match on `params.`. Applied
  // before `preset` and `renames`, which see the shortened paths.
  bool params_only = false;
  // A rename preset's rules (rename_presets.h), applied after params_only
  // and before `renames` (the first matching rule of each list applies).
  // Written with '.' between keys, they apply with dest_separator.
  std::vector<RenameRule> preset;
  // The preset's adjustment of the finished plan: transposes of the arrays
  // whose layout differs between the frameworks, or a refusal of a layout
  // the preset cannot serve (null: none).
  Status (*preset_adjust)(std::vector<ArrayMapping>& plan) = nullptr;
  // The first matching rule decides the destination dtype.
  std::vector<CastRule> casts;
};

struct ArrayMapping {
  layout::ArrayInfo source;
  layout::ArrayInfo dest;
  // Empty: the destination keeps the source's axes. Else destination
  // dimension d is source dimension source_axes[d] ({1, 0}: a transpose),
  // as a rename preset sets it (TransposeMapping).
  std::vector<int> source_axes = {};
};

// Makes `m` write its source with permuted axes: destination dimension d
// is source dimension axes[d]; the destination's shape and chunk follow.
// InvalidArgument (naming the array) unless `axes` is a permutation of the
// source's dimensions.
Status TransposeMapping(ArrayMapping& m, std::vector<int> axes);

// The region of the source array that holds the region `dest_box` of the
// destination array of `m`.
Box SourceBox(const ArrayMapping& m, const Box& dest_box);

// The piece the source decodes at once (ArrayInfo::read_shape), in the
// destination's axes; empty when the source does not say.
Shape SourceReadShapeInDest(const ArrayMapping& m);

// Copies the C-order elements of SourceBox(m, dest_box), at `src`, to `dst`
// as the C-order elements of `dest_box` (in the source's dtype). Without
// source_axes a plain copy.
void ArrangeAsDest(const ArrayMapping& m, const Box& dest_box, const uint8_t* src, uint8_t* dst);

// The arrays to convert, sorted by destination path. InvalidArgument when
// two arrays end up with one destination path (naming both sources), when a
// cast is not supported, or when nothing is selected.
Result<std::vector<ArrayMapping>> PlanConversion(const std::vector<layout::ArrayInfo>& source,
                                                 const ConvertPlanOptions& options);

// Shrinks `chunk` (halving the first dimension first, then the next, ...)
// until a chunk holds at most `max_bytes` at `bytes_per_element`, or every
// dimension is 1. Keeps row-major slabs of the chunk contiguous.
Shape FitChunkShape(Shape chunk, uint64_t bytes_per_element, uint64_t max_bytes);

// As FitChunkShape, in whole multiples of `unit` (aligned at 0, clipped
// to `chunk`): the result is never cut across a unit, and is `unit`
// itself (clipped) when even one unit is over `max_bytes`.
Shape FitChunkShapeInUnits(const Shape& chunk, const Shape& unit, uint64_t bytes_per_element,
                           uint64_t max_bytes);

// The chunks of an array of `shape` with chunk `write_shape` (each at least
// 1), in row-major order of the chunk grid, clipped at the array's end. A
// rank-0 array has one empty-shaped box.
std::vector<Box> ChunkBoxes(const Shape& shape, const Shape& write_shape);

// Splits `box` into row-major slabs of at most `max_bytes` (at
// `bytes_per_element`), each contiguous in a C-order array that the box
// spans fully from the split dimension on. A single element larger than
// max_bytes is still one slab. Empty boxes give no slabs.
std::vector<Box> SplitIntoSlabs(const Box& box, uint64_t bytes_per_element, uint64_t max_bytes);

}  // namespace cairn::engine
