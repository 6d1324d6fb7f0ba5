#include "cairn/layout/checkpoint_format.h"

#include "cairn/zarr/stored_chunk.h"

#include <algorithm>

namespace cairn::layout {

const ArrayInfo* FindArray(const std::vector<ArrayInfo>& arrays, std::string_view path) {
  auto it = std::lower_bound(arrays.begin(), arrays.end(), path,
                             [](const ArrayInfo& a, std::string_view p) { return a.path < p; });
  return it != arrays.end() && it->path == path ? &*it : nullptr;
}

std::vector<std::string> SplitTreePath(std::string_view path, char separator) {
  std::vector<std::string> keys;
  size_t start = 0;
  for (;;) {
    size_t end = path.find(separator, start);
    keys.emplace_back(path.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return keys;
    start = end + 1;
  }
}

std::string JoinTreePath(const std::vector<std::string>& keys, char separator) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += separator;
    out += keys[i];
  }
  return out;
}

Status CheckBoxInArray(const Box& box, const Shape& shape, std::string_view what) {
  bool ok = box.rank() == shape.size() && box.origin.size() == shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = box.origin[d] >= 0 && box.shape[d] >= 0 && box.origin[d] <= shape[d] &&
         box.shape[d] <= shape[d] - box.origin[d];
  }
  if (ok) return Status::OK();
  return Status(StatusCode::kInvalidArgument,
                std::string(what) + ": box " + box.ToString() + " is outside the array's shape " +
                    Box::FromShape(shape).ToString());
}

Result<VerifyStoredStats> CheckpointReader::VerifyStored(
    const std::function<void(StoredProblem)>& problem,
    const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr uint64_t kMaxBoxBytes = uint64_t{64} << 20;
  VerifyStoredStats stats;
  uint64_t total = 0;
  for (const ArrayInfo& a : arrays()) total += NumElements(a.shape) * DTypeSize(a.dtype);
  std::vector<uint8_t> buffer;
  for (const ArrayInfo& a : arrays()) {
    ++stats.arrays;
    const uint64_t elem = DTypeSize(a.dtype);
    // Row-major boxes: whole trailing dimensions, a run of the first
    // dimension that is split, at most kMaxBoxBytes.
    Box box = Box::FromShape(a.shape);
    size_t split = 0;
    uint64_t inner = elem;  // bytes of one index of dimension `split`
    for (size_t d = a.shape.size(); d > 0; --d) {
      split = d - 1;
      const uint64_t next = inner * static_cast<uint64_t>(std::max<Index>(a.shape[d - 1], 1));
      if (next > kMaxBoxBytes || split == 0) break;
      inner = next;
    }
    if (NumElements(a.shape) == 0 && !a.shape.empty()) continue;
    // Dimensions before `split` go one index at a time.
    for (size_t d = 0; d < split; ++d) box.shape[d] = 1;
    const Index step = a.shape.empty()
                           ? 1
                           : std::max<Index>(1, static_cast<Index>(kMaxBoxBytes / std::max<uint64_t>(inner, 1)));
    if (!a.shape.empty()) box.shape[split] = std::min(step, a.shape[split]);
    bool more = true;
    while (more) {
      Box b = box;
      if (!a.shape.empty()) b.shape[split] = std::min(box.shape[split], a.shape[split] - box.origin[split]);
      const uint64_t bytes = static_cast<uint64_t>(b.num_elements()) * elem;
      buffer.resize(std::max<uint64_t>(bytes, 1));
      Status read = ReadBox(a.path, b, buffer.data());
      ++stats.pieces;
      stats.bytes += bytes;
      if (!read.ok()) {
        problem({"unreadable", a.path, "", "", read.ToString()});
        break;  // one problem per array: the rest would say the same
      }
      if (progress) progress(stats.bytes, total);
      // Next box: advance `split`, carrying into the dimensions before it.
      more = false;
      for (size_t d = a.shape.empty() ? 0 : split + 1; d > 0; --d) {
        const size_t i = d - 1;
        box.origin[i] += box.shape[i];
        if (box.origin[i] < a.shape[i]) {
          more = true;
          break;
        }
        box.origin[i] = 0;
      }
    }
  }
  return stats;
}

Result<std::optional<StoredChunk>> CheckpointReader::ReadStoredChunk(std::string_view path,
                                                                   const Box& box) {
  (void)path;
  (void)box;
  return std::optional<StoredChunk>();
}

Status CheckpointWriter::WriteStoredChunk(std::string_view path, const Box& box, ByteView stored) {
  (void)box;
  (void)stored;
  return Status(StatusCode::kUnimplemented,
                std::string(format()) + " writer takes no stored chunks (array `" + std::string(path) + "`)");
}

}  // namespace cairn::layout
