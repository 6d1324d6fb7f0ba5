// AXLearn's `index` file: the commit marker and table of contents of a step
// of AXLearn's regular checkpointer (and, at `<step>/index/index`, of its
// Orbax checkpointer). docs/formats/axlearn.md describes the layout.
//
// The file is `json.dumps` of a list of [path, value] pairs:
//   [["step", 200],
//    ["learner/optimizer/0/count", {"dtype": "int32", "shape": "()"}],
//    ["model/emb", {"dtype": "bfloat16", "shape": "(3, 5, 2)"}],
//    ["input_iter", "<class '...OwnedIterator'>"],
//    ["note", 42]]
// Tensors carry their numpy dtype name and their shape as a Python tuple
// repr; every other value is kept verbatim.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/util/box.h"
#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::axlearn {

inline constexpr std::string_view kIndexFile = "index";
// A larger index is refused (a real one is a few hundred KB).
inline constexpr uint64_t kMaxIndexBytes = 64 << 20;

struct IndexEntry {
  std::string path;
  bool is_tensor = false;
  DType dtype = DType::kFloat32;  // tensors
  Shape shape;                    // tensors
  Json value;                     // everything else, verbatim
};

struct StepIndex {
  int64_t step = 0;
  std::vector<IndexEntry> entries;  // in file order, without the "step" entry
};

// "(3, 5, 2)" -> {3, 5, 2}; "()" -> {}; "(8,)" -> {8}.
Result<Shape> ParseTupleShape(std::string_view text);
std::string FormatTupleShape(const Shape& shape);

// Parses the file; DataLoss naming `what` and the entry on anything else,
// a path given twice included (AXLearn writes a dict). The one parser and
// validator of the file: convert, restore, ls/info and verify all read an
// index through it (ReadIndex in axlearn_checkpoint.h).
Result<StepIndex> ParseIndex(std::string_view text, std::string_view what);
// The file as AXLearn writes it (Python json.dumps layout).
std::string FormatIndex(const StepIndex& index);

// "step_00000100" for 100; AXLearn's step directories have 8 digits.
std::string StepDirName(int64_t step);

}  // namespace cairn::axlearn
