#include "cairn/layout/inspect/diff.h"

#include "cairn/layout/path_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <functional>
#include <memory>

#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/open_checkpoint.h"
#include "cairn/layout/inspect/chunk_grid.h"
#include "cairn/layout/inspect/diff_boxes.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/util/buffer.h"
#include "cairn/zarr/array_url.h"
#include "cairn/zarr/stored_chunks.h"

namespace cairn::inspect {
namespace {

// One array of a side: its dtype, shape, the shape it is stored in, how a
// box is read, and the zarr array behind it when there is one (its stored
// chunks can be listed).
struct SideArray {
  DType dtype = DType::kFloat32;
  Shape shape;
  Shape chunk;  // a chunk, or the format's write_shape
  std::function<Status(const Box&, void*)> read;
  std::shared_ptr<ZarrArray> zarr;
};

struct Side {
  std::string format;
  std::map<std::string, SideArray> arrays;
  std::map<std::string, std::string> strings;
  std::shared_ptr<layout::CheckpointReader> reader;  // keeps reader-backed arrays alive
};

SideArray FromZarr(std::shared_ptr<ZarrArray> array) {
  SideArray a;
  a.dtype = array->dtype();
  a.shape = array->shape();
  a.chunk = array->metadata().chunk_shape;
  a.read = [array](const Box& box, void* out) { return array->Read(box, out); };
  a.zarr = std::move(array);
  return a;
}

Status AddItem(const orbax::Location& loc, const std::string& prefix, Side& side) {
  const std::string dir = loc.Path();
  CAIRN_ASSIGN_OR_RETURN(orbax::OrbaxItem item, orbax::OpenItem(loc));
  side.format = VariantName(item.variant());
  for (const orbax::TreeEntry& e : item.metadata.entries) {
    if (!orbax::IsArrayValueType(e.value.value_type)) continue;
    const std::string param = orbax::ParamName(e.path);
    auto array = orbax::OpenItemArray(item, param);
    if (!array.ok()) return array.status().Annotate("opening array `" + param + "` of " + dir);
    side.arrays[prefix + param] = FromZarr(*array);
  }
  for (const auto& [param, value] : item.strings) side.strings[prefix + param] = value;
  return Status::OK();
}

// AXLearn and safetensors checkpoints, through the checkpoint-format
// interface. Arrays are named by their tree keys joined with '.', as Orbax
// names them, so that any two formats compare by name.
Result<Side> OpenReaderSide(const std::string& url) {
  std::optional<std::string> local = LocalPathOf(url);
  std::shared_ptr<KvStore> store;
  std::string location;
  if (local) {
    std::string path = *local;
    std::string file;
    const size_t slash = path.rfind('/');
    if (path.size() > 12 && (path.ends_with(".safetensors") || path.ends_with(".json")) &&
        slash != std::string::npos) {
      file = path.substr(slash + 1);
      path = path.substr(0, slash);
    }
    CAIRN_ASSIGN_OR_RETURN(store, OpenKvStore(FileUrl(path + "/")));
    location = file;
  } else {
    CAIRN_ASSIGN_OR_RETURN(store, OpenKvStore(url));
  }
  CAIRN_ASSIGN_OR_RETURN(layout::OpenedCheckpoint opened, layout::OpenCheckpoint(store, location));
  if (opened.format == "orbax") return NotFoundError("not an AXLearn or safetensors checkpoint");
  Side side;
  side.format = opened.format;
  side.reader = std::move(opened.reader);
  for (const layout::ArrayInfo& info : side.reader->arrays()) {
    SideArray a;
    a.dtype = info.dtype;
    a.shape = info.shape;
    a.chunk = info.write_shape;
    a.zarr = side.reader->ZarrArrayOf(info.path);
    if (a.zarr && (a.zarr->shape() != a.shape || a.zarr->dtype() != a.dtype)) a.zarr = nullptr;
    if (a.zarr) a.chunk = a.zarr->metadata().chunk_shape;
    layout::CheckpointReader* reader = side.reader.get();
    const std::string path = info.path;
    a.read = [reader, path](const Box& box, void* out) { return reader->ReadBox(path, box, out); };
    side.arrays[info.tree_path.empty() ? info.path : layout::JoinTreePath(info.tree_path, '.')] =
        std::move(a);
  }
  return side;
}

Result<Side> OpenSide(const std::string& url) {
  Side side;
  std::optional<std::string> local = CheckpointPathOf(url);
  std::optional<orbax::Location> loc;
  if (local) {
    auto opened = orbax::OpenLocation(*local);
    if (opened.ok()) loc = std::move(*opened);
  }
  if (loc && LooksLikeItem(*loc)) {
    CAIRN_RETURN_IF_ERROR(AddItem(*loc, "", side));
    return side;
  }
  if (auto other = OpenReaderSide(url); other.ok()) return other;
  if (loc) {
    auto info = DescribeCheckpoint(*loc);
    if (info.ok() && info->kind != CheckpointKind::kItem) {
      if (!info->step_location.store) return NotFoundError(*local + " holds no finalized step");
      std::vector<std::string> items;
      for (const ItemInfo& it : info->items) {
        if (it.is_pytree) items.push_back(it.name);
      }
      if (items.empty()) return NotFoundError(info->step_dir + " holds no PyTree item");
      for (const std::string& name : items) {
        CAIRN_RETURN_IF_ERROR(AddItem(info->step_location.Child(name),
                                      items.size() == 1 ? "" : name + "/", side));
      }
      return side;
    }
  }
  auto array = OpenZarrArray(url);
  if (!array.ok()) {
    return array.status().Annotate("`" + url +
                                   "` is neither a checkpoint (Orbax, AXLearn, safetensors) nor an "
                                   "array");
  }
  side.format = (*array)->metadata().format == ZarrFormat::kV3 ? "zarr3" : "zarr2";
  side.arrays[""] = FromZarr(*array);
  return side;
}

// One scalar part of an element as a double. `dtype` is the part's type
// (for complex elements: the float type of each half, see PartType).
double PartAsDouble(DType dtype, const uint8_t* p) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  switch (info.kind) {
    case DTypeKind::kBool: return *p != 0 ? 1.0 : 0.0;
    case DTypeKind::kSignedInt: {
      switch (info.size) {
        case 1: return static_cast<int8_t>(*p);
        case 2: { int16_t v; std::memcpy(&v, p, 2); return v; }
        case 4: { int32_t v; std::memcpy(&v, p, 4); return v; }
        default: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
      }
    }
    case DTypeKind::kUnsignedInt: {
      switch (info.size) {
        case 1: return *p;
        case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
        case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
        default: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
      }
    }
    case DTypeKind::kFloat: return DecodeFloat(dtype, p);
    case DTypeKind::kComplex: break;
  }
  return 0;
}

// The dtype and byte size of one compared part (complex: a half).
DType PartType(DType dtype) {
  if (dtype == DType::kComplex64) return DType::kFloat32;
  if (dtype == DType::kComplex128) return DType::kFloat64;
  return dtype;
}
size_t PartsPerElement(DType dtype) {
  return GetDTypeInfo(dtype).kind == DTypeKind::kComplex ? 2 : 1;
}

void CompareParts(double a, double b, ArrayDiff& d, const DiffOptions& options) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) {
    if (na != nb) {
      ++d.num_different;
      ++d.nan_mismatches;
    }
    return;
  }
  if (a == b) return;
  const double abs = std::isinf(a) || std::isinf(b) ? INFINITY : std::fabs(a - b);
  const double scale = std::max(std::fabs(a), std::fabs(b));
  // Differences within the tolerance show in max_abs / max_rel too (diff.h):
  // they tell an inexact match from an identical one.
  d.max_abs = std::max(d.max_abs, abs);
  d.max_rel = std::max(d.max_rel, std::isinf(abs) ? 1.0 : abs / scale);
  // Within tolerance (numpy.isclose's rule, B as the reference): equal.
  if (abs <= options.atol + options.rtol * std::fabs(b)) return;
  ++d.num_different;
}

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t SatMul(uint64_t a, uint64_t b) {
  const unsigned __int128 n = static_cast<unsigned __int128>(a) * b;
  return n > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(n);
}

// Reads one box of both sides and compares it element by element.
class BoxComparer {
 public:
  BoxComparer(const std::string& path, const SideArray& a, const SideArray& b,
              const DiffOptions& options)
      : path_(path), a_(a), b_(b), options_(options) {}

  Status Compare(const Box& box, ArrayDiff& d) {
    const DType ta = a_.dtype, tb = b_.dtype;
    const size_t sa = DTypeSize(ta), sb = DTypeSize(tb);
    const bool same_type = ta == tb;
    const DType pa = PartType(ta), pb = PartType(tb);
    const size_t parts = std::min(PartsPerElement(ta), PartsPerElement(tb));
    const uint64_t n = static_cast<uint64_t>(box.num_elements());
    ba_.resize(n * sa);
    bb_.resize(n * sb);
    CAIRN_RETURN_IF_ERROR(a_.read(box, ba_.data()).Annotate("diff: reading A `" + path_ + "`"));
    CAIRN_RETURN_IF_ERROR(b_.read(box, bb_.data()).Annotate("diff: reading B `" + path_ + "`"));
    for (uint64_t i = 0; i < n; ++i) {
      const uint8_t* ea = ba_.data() + i * sa;
      const uint8_t* eb = bb_.data() + i * sb;
      if (same_type && std::memcmp(ea, eb, sa) == 0) continue;
      for (size_t k = 0; k < parts; ++k) {
        CompareParts(PartAsDouble(pa, ea + k * DTypeSize(pa)),
                     PartAsDouble(pb, eb + k * DTypeSize(pb)), d, options_);
      }
    }
    return Status::OK();
  }

 private:
  const std::string& path_;
  const SideArray& a_;
  const SideArray& b_;
  const DiffOptions& options_;
  Buffer ba_, bb_;
};

Result<StoredChunks> ListChunks(const ZarrArray& array, const std::string& side,
                                const std::string& path) {
  auto chunks = ListStoredChunks(*array.shared_store(), array.prefix(), array.metadata());
  if (!chunks.ok()) return chunks.status().Annotate("diff: " + side + " `" + path + "`");
  return chunks;
}

// Compares the values of `a` and `b` (equal shapes) box by box
// (diff_boxes.h): the boxes holding a chunk stored on either side when both
// can list their chunks, every box otherwise. `unlisted` names a side that
// cannot ("B (safetensors)"), for the error when there are too many boxes.
Status CompareValues(const std::string& path, const SideArray& a, const SideArray& b,
                     const std::string& unlisted, ArrayDiff& d, uint64_t& done, uint64_t total,
                     const DiffOptions& options) {
  d.values_compared = true;
  const size_t sa = DTypeSize(a.dtype);
  const Shape box = CompareBoxShape(a.shape, a.chunk, b.chunk, std::max(sa, DTypeSize(b.dtype)));
  BoxComparer comparer(path, a, b, options);
  auto compare = [&](const Box& bx) -> Status {
    CAIRN_RETURN_IF_ERROR(comparer.Compare(bx, d));
    done = SatAdd(done, SatMul(static_cast<uint64_t>(bx.num_elements()), sa));
    if (options.progress) options.progress(done, total);
    return Status::OK();
  };
  if (a.zarr && b.zarr) {
    CAIRN_ASSIGN_OR_RETURN(StoredChunks stored_a, ListChunks(*a.zarr, "A", path));
    CAIRN_ASSIGN_OR_RETURN(StoredChunks stored_b, ListChunks(*b.zarr, "B", path));
    const CompareCells cells =
        TouchedCompareCells(a.shape, box, stored_a, a.zarr->metadata().chunk_shape, stored_b,
                            b.zarr->metadata().chunk_shape);
    for (const GridCell& cell : cells.touched) {
      CAIRN_RETURN_IF_ERROR(compare(CompareBox(cell, a.shape, box)));
    }
    if (!cells.first_untouched) return Status::OK();
    // Stored on neither side: every element holds each side's fill value.
    // One element (read, so that it is what a read returns) stands for all.
    Box one = CompareBox(*cells.first_untouched, a.shape, box);
    one.shape.assign(one.shape.size(), 1);
    ArrayDiff fill;
    CAIRN_RETURN_IF_ERROR(comparer.Compare(one, fill));
    const uint64_t n = cells.untouched_elements;
    d.num_different = SatAdd(d.num_different, SatMul(fill.num_different, n));
    d.nan_mismatches = SatAdd(d.nan_mismatches, SatMul(fill.nan_mismatches, n));
    d.max_abs = std::max(d.max_abs, fill.max_abs);
    d.max_rel = std::max(d.max_rel, fill.max_rel);
    done = SatAdd(done, SatMul(n, sa));
    if (options.progress) options.progress(done, total);
    return Status::OK();
  }
  const Shape grid = CompareGrid(a.shape, box);
  CAIRN_ASSIGN_OR_RETURN(const uint64_t boxes, UnlistedCompareBoxes(path, a.shape, box, unlisted));
  if (boxes == 0) return Status::OK();
  GridCell cell(grid.size(), 0);
  do {
    CAIRN_RETURN_IF_ERROR(compare(CompareBox(cell, a.shape, box)));
  } while (NextGridCell(cell, grid));
  return Status::OK();
}

}  // namespace

bool DiffReport::identical() const {
  if (!only_in_a.empty() || !only_in_b.empty() || !strings_differ.empty()) return false;
  return std::all_of(arrays.begin(), arrays.end(), [](const ArrayDiff& d) { return d.same(); });
}

// options.include and options.renames (layout/path_rules.h, as `cairn
// convert` applies them): A's leaves matching an include, renamed; B's
// leaves matching an include or named as a kept leaf of A.
template <typename Leaf>
Status SelectAndRename(std::map<std::string, Leaf>& a, std::map<std::string, Leaf>& b,
                       const DiffOptions& options) {
  if (options.include.empty() && options.renames.empty()) return Status();
  std::map<std::string, Leaf> kept_a;
  std::map<std::string, std::string> source_of;  // renamed path -> A's path
  for (auto& [path, leaf] : a) {
    if (!layout::PathSelected(options.include, {}, path)) continue;
    std::string renamed = layout::ApplyRenames(options.renames, path);
    auto [it, inserted] = source_of.emplace(renamed, path);
    if (!inserted) {
      return InvalidArgumentError("diff: A's `" + it->second + "` and `" + path +
                                  "` would both be compared as `" + renamed + "` (--rename)");
    }
    kept_a.emplace(std::move(renamed), std::move(leaf));
  }
  std::map<std::string, Leaf> kept_b;
  for (auto& [path, leaf] : b) {
    if (kept_a.count(path) || (!options.include.empty() && layout::PathSelected(options.include, {}, path))) {
      kept_b.emplace(path, std::move(leaf));
    }
  }
  a = std::move(kept_a);
  b = std::move(kept_b);
  return Status();
}

Result<DiffReport> Diff(const std::string& a, const std::string& b, const DiffOptions& options) {
  DiffReport r;
  r.a = a;
  r.b = b;
  Result<Side> opened_a = OpenSide(a);
  if (!opened_a.ok()) return opened_a.status().Annotate("diff: A");
  Result<Side> opened_b = OpenSide(b);
  if (!opened_b.ok()) return opened_b.status().Annotate("diff: B");
  Side& sa = *opened_a;
  Side& sb = *opened_b;
  CAIRN_RETURN_IF_ERROR(SelectAndRename(sa.arrays, sb.arrays, options));
  CAIRN_RETURN_IF_ERROR(SelectAndRename(sa.strings, sb.strings, options));
  r.format_a = sa.format;
  r.format_b = sb.format;
  uint64_t total = 0;
  for (const auto& [path, array] : sa.arrays) {
    auto it = sb.arrays.find(path);
    if (it == sb.arrays.end()) {
      r.only_in_a.push_back(path);
    } else if (array.shape == it->second.shape) {
      uint64_t elements = 1;
      for (Index n : array.shape) elements = SatMul(elements, static_cast<uint64_t>(n));
      total = SatAdd(total, SatMul(elements, DTypeSize(array.dtype)));
    }
  }
  for (const auto& [path, array] : sb.arrays) {
    if (!sa.arrays.count(path)) r.only_in_b.push_back(path);
  }
  for (const auto& [path, value] : sa.strings) {
    auto it = sb.strings.find(path);
    if (it == sb.strings.end()) {
      r.only_in_a.push_back(path);
    } else if (it->second != value) {
      r.strings_differ.push_back(path);
    }
  }
  for (const auto& [path, value] : sb.strings) {
    if (!sa.strings.count(path)) r.only_in_b.push_back(path);
  }
  std::sort(r.only_in_a.begin(), r.only_in_a.end());
  std::sort(r.only_in_b.begin(), r.only_in_b.end());
  uint64_t done = 0;
  for (const auto& [path, array] : sa.arrays) {
    auto it = sb.arrays.find(path);
    if (it == sb.arrays.end()) continue;
    ArrayDiff d;
    d.path = path;
    d.dtype_a = std::string(DTypeName(array.dtype));
    d.dtype_b = std::string(DTypeName(it->second.dtype));
    d.shape_a = array.shape;
    d.shape_b = it->second.shape;
    d.dtypes_may_differ = options.atol > 0 || options.rtol > 0;
    if (d.shape_a == d.shape_b) {
      const std::string unlisted =
          !array.zarr ? "A (" + sa.format + ")" : "B (" + sb.format + ")";
      CAIRN_RETURN_IF_ERROR(
          CompareValues(path, array, it->second, unlisted, d, done, total, options));
    }
    r.arrays.push_back(std::move(d));
  }
  return r;
}

}  // namespace cairn::inspect
