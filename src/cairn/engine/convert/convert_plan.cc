#include "cairn/engine/convert/convert_plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "cairn/dtype/cast.h"
#include "cairn/layout/path_rules.h"

namespace cairn::engine {
namespace {

// The tree path under a training state's `params` (and a second `params`),
// or nullopt when `tree` is not a parameter.
std::optional<std::vector<std::string>> ParamsTreePath(std::vector<std::string> tree) {
  if (tree.size() < 2 || tree[0] != "params") return std::nullopt;
  tree.erase(tree.begin());
  if (tree.size() >= 2 && tree[0] == "params") tree.erase(tree.begin());
  return tree;
}

// A preset's rules are written with '.' between keys (rename_presets.h):
// given with the destination's separator.
std::vector<RenameRule> PresetRulesFor(std::vector<RenameRule> rules, char separator) {
  if (separator == '.') return rules;
  for (RenameRule& r : rules) {
    std::replace(r.from.begin(), r.from.end(), '.', separator);
    std::replace(r.to.begin(), r.to.end(), '.', separator);
  }
  return rules;
}

}  // namespace

Result<std::vector<ArrayMapping>> PlanConversion(const std::vector<layout::ArrayInfo>& source,
                                                 const ConvertPlanOptions& options) {
  const std::vector<RenameRule> preset = PresetRulesFor(options.preset, options.dest_separator);
  std::vector<ArrayMapping> plan;
  std::map<std::string, std::string> source_of;  // destination path -> source path
  for (const layout::ArrayInfo& s : source) {
    if (!layout::PathSelected(options.include, options.exclude, s.path)) continue;
    ArrayMapping m{s, s};
    m.dest.tree_path = s.tree_path.empty() ? std::vector<std::string>{s.path} : s.tree_path;
    if (options.params_only) {
      auto params = ParamsTreePath(s.tree_path.empty() ? layout::SplitTreePath(s.path, '.')
                                                       : s.tree_path);
      if (!params) continue;
      m.dest.tree_path = std::move(*params);
    }
    m.dest.path = layout::JoinTreePath(m.dest.tree_path, options.dest_separator);
    // The preset's rules, then the user's (which see the preset's names).
    const std::string renamed =
        layout::ApplyRenames(options.renames, layout::ApplyRenames(preset, m.dest.path));
    if (renamed != m.dest.path) {
      m.dest.path = renamed;
      m.dest.tree_path = layout::SplitTreePath(m.dest.path, options.dest_separator);
    }
    for (const CastRule& c : options.casts) {
      if (!layout::GlobMatches(c.glob, s.path)) continue;
      if (!CanCast(s.dtype, c.dtype)) {
        return Status(StatusCode::kInvalidArgument,
                      "array `" + s.path + "`: cannot cast " + std::string(DTypeName(s.dtype)) +
                          " to " + std::string(DTypeName(c.dtype)) + " (rule `" + c.glob + "`)");
      }
      m.dest.dtype = c.dtype;
      break;
    }
    m.dest.stored_bytes = 0;
    m.dest.read_shape.clear();  // the destination's writer chooses its own
    auto [it, inserted] = source_of.emplace(m.dest.path, s.path);
    if (!inserted) {
      return Status(StatusCode::kInvalidArgument,
                    "arrays `" + it->second + "` and `" + s.path +
                        "` would both be written as `" + m.dest.path + "`");
    }
    plan.push_back(std::move(m));
  }
  if (plan.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "no array selected: " + std::to_string(source.size()) +
                      " arrays in the source, none matched the include/exclude patterns" +
                      (options.params_only ? " under `params` (params-only)" : ""));
  }
  std::sort(plan.begin(), plan.end(), [](const ArrayMapping& a, const ArrayMapping& b) {
    return a.dest.path < b.dest.path;
  });
  if (options.preset_adjust != nullptr) CAIRN_RETURN_IF_ERROR(options.preset_adjust(plan));
  return plan;
}

Status TransposeMapping(ArrayMapping& m, std::vector<int> axes) {
  const size_t rank = m.source.shape.size();
  std::vector<bool> seen(rank, false);
  bool valid = axes.size() == rank;
  for (size_t d = 0; valid && d < axes.size(); ++d) {
    valid = axes[d] >= 0 && static_cast<size_t>(axes[d]) < rank && !seen[axes[d]];
    if (valid) seen[axes[d]] = true;
  }
  if (!valid) {
    return Status(StatusCode::kInvalidArgument,
                  "array `" + m.source.path + "` of rank " + std::to_string(rank) +
                      ": the axes of a transpose must be a permutation of its dimensions");
  }
  auto permuted = [&](const Shape& s) {
    if (s.size() != rank) return s;
    Shape out(rank);
    for (size_t d = 0; d < rank; ++d) out[d] = s[axes[d]];
    return out;
  };
  m.dest.shape = permuted(m.source.shape);
  m.dest.write_shape = permuted(m.source.write_shape);
  bool identity = true;
  for (size_t d = 0; d < rank; ++d) identity = identity && axes[d] == static_cast<int>(d);
  m.source_axes = identity ? std::vector<int>{} : std::move(axes);
  return Status::OK();
}

Box SourceBox(const ArrayMapping& m, const Box& dest_box) {
  if (m.source_axes.empty()) return dest_box;
  Box b;
  b.origin.resize(dest_box.rank());
  b.shape.resize(dest_box.rank());
  for (size_t d = 0; d < dest_box.rank(); ++d) {
    b.origin[m.source_axes[d]] = dest_box.origin[d];
    b.shape[m.source_axes[d]] = dest_box.shape[d];
  }
  return b;
}

Shape SourceReadShapeInDest(const ArrayMapping& m) {
  const Shape& unit = m.source.read_shape;
  if (m.source_axes.empty() || unit.size() != m.source_axes.size()) return unit;
  Shape out(unit.size());
  for (size_t d = 0; d < unit.size(); ++d) out[d] = unit[m.source_axes[d]];
  return out;
}

void ArrangeAsDest(const ArrayMapping& m, const Box& dest_box, const uint8_t* src, uint8_t* dst) {
  const size_t es = DTypeSize(m.source.dtype);
  const uint64_t n = static_cast<uint64_t>(dest_box.num_elements());
  if (m.source_axes.empty()) {
    std::memcpy(dst, src, n * es);
    return;
  }
  const std::vector<Index> source_strides = CStrides(SourceBox(m, dest_box).shape, es);
  std::vector<Index> read_strides(dest_box.rank());
  for (size_t d = 0; d < dest_box.rank(); ++d) read_strides[d] = source_strides[m.source_axes[d]];
  StridedCopy(src, read_strides, dst, CStrides(dest_box.shape, es), dest_box.shape, es);
}

Shape FitChunkShape(Shape chunk, uint64_t bytes_per_element, uint64_t max_bytes) {
  auto bytes = [&] {
    unsigned __int128 n = bytes_per_element;
    for (Index c : chunk) n *= static_cast<uint64_t>(std::max<Index>(c, 1));
    return n;
  };
  for (size_t d = 0; d < chunk.size() && bytes() > max_bytes; ++d) {
    while (chunk[d] > 1 && bytes() > max_bytes) chunk[d] = (chunk[d] + 1) / 2;
  }
  return chunk;
}

Shape FitChunkShapeInUnits(const Shape& chunk, const Shape& unit, uint64_t bytes_per_element,
                           uint64_t max_bytes) {
  if (unit.size() != chunk.size()) return FitChunkShape(chunk, bytes_per_element, max_bytes);
  Shape cells(chunk.size()), u(chunk.size());
  uint64_t unit_bytes = bytes_per_element;
  for (size_t d = 0; d < chunk.size(); ++d) {
    u[d] = std::max<Index>(1, std::min(unit[d], std::max<Index>(chunk[d], 1)));
    cells[d] = (std::max<Index>(chunk[d], 1) + u[d] - 1) / u[d];
    unit_bytes *= static_cast<uint64_t>(u[d]);
  }
  cells = FitChunkShape(std::move(cells), unit_bytes, max_bytes);
  Shape fitted(chunk.size());
  for (size_t d = 0; d < chunk.size(); ++d) fitted[d] = std::min(chunk[d], cells[d] * u[d]);
  return fitted;
}

std::vector<Box> ChunkBoxes(const Shape& shape, const Shape& write_shape) {
  const size_t rank = shape.size();
  std::vector<Index> chunk(rank), grid(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (shape[d] == 0) return {};
    chunk[d] = std::max<Index>(1, d < write_shape.size() ? write_shape[d] : shape[d]);
    grid[d] = (shape[d] + chunk[d] - 1) / chunk[d];
  }
  std::vector<Box> boxes;
  std::vector<Index> cell(rank, 0);
  for (;;) {
    Box b;
    for (size_t d = 0; d < rank; ++d) {
      b.origin.push_back(cell[d] * chunk[d]);
      b.shape.push_back(std::min(chunk[d], shape[d] - cell[d] * chunk[d]));
    }
    boxes.push_back(std::move(b));
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++cell[d] < grid[d]) break;
      cell[d] = 0;
      if (d == 0) return boxes;
    }
    if (rank == 0) return boxes;
  }
}

std::vector<Box> SplitIntoSlabs(const Box& box, uint64_t bytes_per_element, uint64_t max_bytes) {
  const size_t rank = box.rank();
  if (box.empty()) return {};
  if (rank == 0 || static_cast<uint64_t>(box.num_elements()) * bytes_per_element <= max_bytes) {
    return {box};
  }
  // The split dimension d: the box's extent from d+1 on fits in max_bytes.
  uint64_t inner = bytes_per_element;
  size_t d = rank - 1;
  while (d > 0 && inner * box.shape[d] <= max_bytes) {
    inner *= box.shape[d];
    --d;
  }
  const Index step = std::max<Index>(1, static_cast<Index>(max_bytes / inner));
  std::vector<Box> slabs;
  std::vector<Index> pos(box.origin.begin(), box.origin.begin() + d);
  for (;;) {
    for (Index start = 0; start < box.shape[d]; start += step) {
      Box s;
      for (size_t k = 0; k < d; ++k) {
        s.origin.push_back(pos[k]);
        s.shape.push_back(1);
      }
      s.origin.push_back(box.origin[d] + start);
      s.shape.push_back(std::min(step, box.shape[d] - start));
      for (size_t k = d + 1; k < rank; ++k) {
        s.origin.push_back(box.origin[k]);
        s.shape.push_back(box.shape[k]);
      }
      slabs.push_back(std::move(s));
    }
    size_t k = d;
    while (k > 0) {
      --k;
      if (++pos[k] < box.origin[k] + box.shape[k]) break;
      pos[k] = box.origin[k];
      if (k == 0) return slabs;
    }
    if (d == 0) return slabs;
  }
}

}  // namespace cairn::engine
