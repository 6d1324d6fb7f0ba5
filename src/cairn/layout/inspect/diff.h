// `cairn diff A B`: compares two checkpoints (or two arrays) by structure,
// dtype, shape and values, streaming chunk by chunk.
//
// A side is an Orbax checkpoint on a local path (item, step or root; a root
// means its latest finalized step), whose arrays are named by param name
// (prefixed with `<item>/` when the step has several PyTree items), an
// AXLearn or safetensors checkpoint (layout/open_checkpoint.h: read through
// the checkpoint-format interface, arrays named by their tree keys joined
// with '.', so `params/w` of AXLearn meets `params.w` of Orbax), or a zarr
// array URL (`...|zarr3:`, `...|zarr2:`, or a directory holding
// zarr.json/.zarray), which is one array with the empty path. Different
// formats compare by content: an ocdbt+zarr3 item against a dir+zarr2 one.
//
// Values: arrays with equal shapes are read box by box from both sides, in
// boxes holding a chunk of either side (diff_boxes.h); elements are compared
// bitwise first, then as doubles (complex: each part). When both sides list
// their stored chunks (zarr arrays: Orbax, AXLearn, array URLs), only the
// boxes overlapping a chunk stored on either side are read; the rest holds
// each side's fill value, compared once and counted for every element
// (fill values 0 and 7 over 2^62 elements stored nowhere: 2^62 differ). The
// work is bounded by the chunks stored, not by the declared shape. A side
// that cannot list them (safetensors) is read over the whole array, and
// more than kMaxUnlistedCompareBoxes boxes are refused (ResourceExhausted
// naming the array). max_abs =
// max |a-b|; max_rel = max |a-b| / max(|a|,|b|). Two NaNs count as equal;
// a NaN against a number is a difference (counted in nan_mismatches).
// Orbax string leaves (`_strings.json`) are compared as strings.
//
// Memory: two box-sized buffers (at most 64 MiB each) at a time, and the
// stored chunks' grid cells of the array being compared.
// Thread safety: pure function; progress is called from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cairn/layout/path_rules.h"
#include "cairn/util/box.h"
#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::inspect {

struct ArrayDiff {
  std::string path;
  std::string dtype_a, dtype_b;
  Shape shape_a, shape_b;
  bool values_compared = false;  // false when the shapes differ
  uint64_t num_different = 0;    // elements (parts, for complex) that differ
  uint64_t nan_mismatches = 0;
  double max_abs = 0;
  double max_rel = 0;
  // A tolerance was given: values decide, not dtypes (a bf16 cast of f32).
  bool dtypes_may_differ = false;
  bool same() const {
    return (dtype_a == dtype_b || dtypes_may_differ) && shape_a == shape_b && values_compared &&
           num_different == 0;
  }
};

struct DiffReport {
  std::string a, b;
  std::string format_a, format_b;  // "ocdbt+zarr3", ..., or "zarr3"/"zarr2" for an array URL
  std::vector<std::string> only_in_a, only_in_b;
  std::vector<ArrayDiff> arrays;          // every path in both, sorted
  std::vector<std::string> strings_differ;  // string leaves with other values
  bool identical() const;
};

struct DiffOptions {
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Values a (of A) and b (of B) count as equal when |a - b| <= atol +
  // rtol * |b| (numpy.isclose). With either set, arrays of different dtypes
  // whose values agree count as the same. Differences below the tolerance
  // still show in max_abs / max_rel.
  double atol = 0;
  double rtol = 0;
  // Which leaves to compare, as `cairn convert` selects and renames
  // (layout/path_rules.h): A's leaves matching an include glob (all when
  // none) are renamed by the first matching rule, then met by path with
  // B's leaves that match an include or carry a kept name. Paths are the
  // '.'-joined tree paths. Two of A's leaves renamed to one name:
  // InvalidArgument.
  std::vector<std::string> include;
  std::vector<layout::RenameRule> renames;
};

// Compares `a` and `b`. Errors (either side cannot be opened, or a read
// fails: DataLoss naming the array and key) are returned as such.
Result<DiffReport> Diff(const std::string& a, const std::string& b, const DiffOptions& options = {});

}  // namespace cairn::inspect
