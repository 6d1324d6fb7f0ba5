#include "cairn/layout/inspect/diff.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <functional>
#include <memory>

#include "cairn/kvstore/url.h"
#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/open_checkpoint.h"
#include "cairn/layout/inspect/chunk_grid.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/util/buffer.h"
#include "cairn/zarr/array_url.h"

namespace cairn::inspect {
namespace {

// One array of a side: its dtype, shape, the boxes it is compared in, and
// how a box is read.
struct SideArray {
  DType dtype = DType::kFloat32;
  Shape shape;
  Shape chunk;  // compared one such box at a time (at most kMaxCompareBytes)
  std::function<Status(const Box&, void*)> read;
};

struct Side {
  std::string format;
  std::map<std::string, SideArray> arrays;
  std::map<std::string, std::string> strings;
  std::shared_ptr<layout::CheckpointReader> reader;  // keeps reader-backed arrays alive
};

// A box compared at once holds at most this many bytes per side.
constexpr uint64_t kMaxCompareBytes = uint64_t{64} << 20;

Shape BoundedChunk(Shape chunk, const Shape& shape, size_t elem) {
  if (chunk.size() != shape.size()) chunk = shape;
  auto bytes = [&] {
    unsigned __int128 n = elem;
    for (Index c : chunk) n *= static_cast<uint64_t>(std::max<Index>(c, 1));
    return n;
  };
  for (size_t d = 0; d < chunk.size() && bytes() > kMaxCompareBytes; ++d) {
    while (chunk[d] > 1 && bytes() > kMaxCompareBytes) chunk[d] = (chunk[d] + 1) / 2;
  }
  for (Index& c : chunk) c = std::max<Index>(c, 1);
  return chunk;
}

SideArray FromZarr(std::shared_ptr<ZarrArray> array) {
  SideArray a;
  a.dtype = array->dtype();
  a.shape = array->shape();
  a.chunk = BoundedChunk(array->metadata().chunk_shape, a.shape, DTypeSize(a.dtype));
  a.read = [array](const Box& box, void* out) { return array->Read(box, out); };
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
    CAIRN_ASSIGN_OR_RETURN(store, OpenKvStore("file://" + path + "/"));
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
    a.chunk = BoundedChunk(info.write_shape, info.shape, DTypeSize(info.dtype));
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

// The boxes of the grid of `chunk` over `shape`, row-major, clipped at the
// end (rank 0: one empty box; a zero-size array: none).
std::vector<Box> CompareBoxes(const Shape& shape, const Shape& chunk) {
  std::vector<Box> boxes;
  Shape grid(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return boxes;
    grid[d] = (shape[d] + chunk[d] - 1) / chunk[d];
  }
  std::vector<Index> cell(shape.size(), 0);
  do {
    Box b;
    for (size_t d = 0; d < shape.size(); ++d) {
      b.origin.push_back(cell[d] * chunk[d]);
      b.shape.push_back(std::min(chunk[d], shape[d] - cell[d] * chunk[d]));
    }
    boxes.push_back(std::move(b));
  } while (NextGridCell(cell, grid));
  return boxes;
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
  // Within tolerance (numpy.isclose's rule, B as the reference): equal.
  if (abs <= options.atol + options.rtol * std::fabs(b)) return;
  ++d.num_different;
  d.max_abs = std::max(d.max_abs, abs);
  d.max_rel = std::max(d.max_rel, std::isinf(abs) ? 1.0 : abs / scale);
}

Status CompareValues(const std::string& path, const SideArray& a, const SideArray& b,
                     ArrayDiff& d, uint64_t& done, uint64_t total, const DiffOptions& options) {
  d.values_compared = true;
  const DType ta = a.dtype, tb = b.dtype;
  const size_t sa = DTypeSize(ta), sb = DTypeSize(tb);
  const bool same_type = ta == tb;
  const DType pa = PartType(ta), pb = PartType(tb);
  const size_t parts = std::min(PartsPerElement(ta), PartsPerElement(tb));
  Buffer ba, bb;
  for (const Box& box : CompareBoxes(a.shape, a.chunk)) {
    const uint64_t n = static_cast<uint64_t>(box.num_elements());
    ba.resize(n * sa);
    bb.resize(n * sb);
    CAIRN_RETURN_IF_ERROR(a.read(box, ba.data()).Annotate("diff: reading A `" + path + "`"));
    CAIRN_RETURN_IF_ERROR(b.read(box, bb.data()).Annotate("diff: reading B `" + path + "`"));
    for (uint64_t i = 0; i < n; ++i) {
      const uint8_t* ea = ba.data() + i * sa;
      const uint8_t* eb = bb.data() + i * sb;
      if (same_type && std::memcmp(ea, eb, sa) == 0) continue;
      for (size_t k = 0; k < parts; ++k) {
        CompareParts(PartAsDouble(pa, ea + k * DTypeSize(pa)),
                     PartAsDouble(pb, eb + k * DTypeSize(pb)), d, options);
      }
    }
    done += n * sa;
    if (options.progress) options.progress(done, total);
  }
  return Status::OK();
}

}  // namespace

bool DiffReport::identical() const {
  if (!only_in_a.empty() || !only_in_b.empty() || !strings_differ.empty()) return false;
  return std::all_of(arrays.begin(), arrays.end(), [](const ArrayDiff& d) { return d.same(); });
}

Json ToJson(const DiffReport& r) {
  Json arrays = Json::array();
  for (const ArrayDiff& d : r.arrays) {
    Json j = {{"path", d.path}, {"same", d.same()}, {"dtype_a", d.dtype_a},
              {"dtype_b", d.dtype_b}, {"shape_a", d.shape_a}, {"shape_b", d.shape_b},
              {"values_compared", d.values_compared}, {"num_different", d.num_different},
              {"nan_mismatches", d.nan_mismatches}};
    // JSON has no infinity: an infinite difference is written as null.
    j["max_abs"] = std::isinf(d.max_abs) ? Json(nullptr) : Json(d.max_abs);
    j["max_rel"] = d.max_rel;
    arrays.push_back(std::move(j));
  }
  return {{"a", r.a}, {"b", r.b}, {"format_a", r.format_a}, {"format_b", r.format_b},
          {"identical", r.identical()}, {"only_in_a", r.only_in_a},
          {"only_in_b", r.only_in_b}, {"strings_differ", r.strings_differ},
          {"arrays", arrays}};
}

Result<DiffReport> Diff(const std::string& a, const std::string& b, const DiffOptions& options) {
  DiffReport r;
  r.a = a;
  r.b = b;
  Result<Side> opened_a = OpenSide(a);
  if (!opened_a.ok()) return opened_a.status().Annotate("diff: A");
  Result<Side> opened_b = OpenSide(b);
  if (!opened_b.ok()) return opened_b.status().Annotate("diff: B");
  const Side& sa = *opened_a;
  const Side& sb = *opened_b;
  r.format_a = sa.format;
  r.format_b = sb.format;
  uint64_t total = 0;
  for (const auto& [path, array] : sa.arrays) {
    auto it = sb.arrays.find(path);
    if (it == sb.arrays.end()) {
      r.only_in_a.push_back(path);
    } else if (array.shape == it->second.shape) {
      total += static_cast<uint64_t>(Box::FromShape(array.shape).num_elements()) *
               DTypeSize(array.dtype);
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
      CAIRN_RETURN_IF_ERROR(CompareValues(path, array, it->second, d, done, total, options));
    }
    r.arrays.push_back(std::move(d));
  }
  return r;
}

}  // namespace cairn::inspect
