#include "cairn/kvstore/ocdbt/format/data_file.h"

#include <algorithm>

#include "cairn/util/coding.h"

namespace cairn::ocdbt {

std::string IndirectDataReference::ToString() const {
  if (IsMissing()) return "<missing>";
  return file_id.FullPath() + "@[" + std::to_string(offset) + ",+" + std::to_string(length) +
         ")";
}

Status ValidateIndirectDataReference(const IndirectDataReference& ref, bool allow_missing,
                                     const FieldReader& at) {
  if (ref.IsMissing()) {
    if (allow_missing) return Status::OK();
    return at.Error("unexpected missing data reference");
  }
  constexpr uint64_t kMax = (uint64_t{1} << 63) - 1;
  if (ref.offset > kMax || ref.length > kMax - ref.offset) {
    return at.Error("data reference offset " + std::to_string(ref.offset) + " + length " +
                    std::to_string(ref.length) + " exceeds 2^63-1");
  }
  return Status::OK();
}

namespace {

size_t CommonPrefix(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// True if `path` is absolute or has a ".." component.
bool EscapesRoot(std::string_view path) {
  if (!path.empty() && path.front() == '/') return true;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view component = path.substr(start, end - start);
    if (component == ".." || component == ".") return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

void DataFileTableBuilder::Encode(std::string_view transitive_path, Buffer* out) {
  std::vector<const DataFileId*> ids;
  uint64_t i = 0;
  for (auto& [id, index] : index_) {
    index = i++;
    ids.push_back(&id);
  }
  auto base = [&](size_t k) {
    return std::string_view(ids[k]->base_path).substr(transitive_path.size());
  };
  AppendVarint64(out, ids.size());
  std::vector<uint64_t> prefix(ids.size(), 0);
  for (size_t k = 1; k < ids.size(); ++k) {
    std::string_view b0 = base(k - 1), b1 = base(k);
    size_t p = CommonPrefix(b0, b1);
    if (b0 == b1) p += CommonPrefix(ids[k - 1]->relative_path, ids[k]->relative_path);
    prefix[k] = p;
    AppendVarint64(out, p);
  }
  for (size_t k = 0; k < ids.size(); ++k) {
    AppendVarint64(out, base(k).size() + ids[k]->relative_path.size() - prefix[k]);
  }
  for (size_t k = 0; k < ids.size(); ++k) AppendVarint64(out, base(k).size());
  for (size_t k = 0; k < ids.size(); ++k) {
    std::string path = std::string(base(k)) + ids[k]->relative_path;
    out->append(std::string_view(path).substr(prefix[k]));
  }
}

Result<std::vector<DataFileId>> DecodeDataFileTable(FieldReader& r,
                                                    std::string_view transitive_path) {
  uint64_t n;
  CAIRN_RETURN_IF_ERROR(r.Varint64(&n, "data file table num_files"));
  // Each file has at least a suffix-length and a base-length byte.
  CAIRN_RETURN_IF_ERROR(r.CheckCount(n, 2, "data file table num_files"));
  std::vector<uint32_t> prefix_len(n, 0), suffix_len(n), base_len(n);
  for (uint64_t i = 1; i < n; ++i) {
    CAIRN_RETURN_IF_ERROR(r.Varint16(&prefix_len[i], "data file path_prefix_length"));
  }
  for (uint64_t i = 0; i < n; ++i) {
    CAIRN_RETURN_IF_ERROR(r.Varint16(&suffix_len[i], "data file path_suffix_length"));
  }
  const uint64_t max_len = kMaxPathLength - std::min<uint64_t>(kMaxPathLength,
                                                              transitive_path.size());
  for (uint64_t i = 0; i < n; ++i) {
    CAIRN_RETURN_IF_ERROR(r.Varint16(&base_len[i], "data file base_path_length"));
    uint64_t path_len = uint64_t{prefix_len[i]} + suffix_len[i];
    if (path_len > max_len) {
      return r.Error("data file " + std::to_string(i) + ": path length " +
                     std::to_string(path_len) + " exceeds " + std::to_string(max_len));
    }
    if (base_len[i] > path_len) {
      return r.Error("data file " + std::to_string(i) + ": base_path_length " +
                     std::to_string(base_len[i]) + " exceeds path length " +
                     std::to_string(path_len));
    }
    if (i > 0 && prefix_len[i] > std::min(base_len[i - 1], base_len[i]) &&
        base_len[i] != base_len[i - 1]) {
      return r.Error("data file " + std::to_string(i) +
                     ": path prefix extends past differing base paths");
    }
  }
  std::vector<DataFileId> table;
  table.reserve(n);
  std::string prev;
  for (uint64_t i = 0; i < n; ++i) {
    if (prefix_len[i] > prev.size()) {
      return r.Error("data file " + std::to_string(i) + ": path_prefix_length " +
                     std::to_string(prefix_len[i]) + " exceeds previous path length " +
                     std::to_string(prev.size()));
    }
    ByteView suffix;
    CAIRN_RETURN_IF_ERROR(r.Bytes(suffix_len[i], &suffix, "data file path_suffix"));
    std::string path = prev.substr(0, prefix_len[i]);
    path += AsStringView(suffix);
    if (EscapesRoot(path) || path.find('\0') != std::string::npos) {
      return r.Error("data file " + std::to_string(i) + ": path `" + path +
                     "` is absolute or has a `.` or `..` component (data files must "
                     "stay under the database root)");
    }
    DataFileId id;
    id.base_path = std::string(transitive_path) + path.substr(0, base_len[i]);
    id.relative_path = path.substr(base_len[i]);
    if (!transitive_path.empty() && EscapesRoot(id.FullPath())) {
      return r.Error("data file " + std::to_string(i) + ": resolved path leaves the root");
    }
    table.push_back(std::move(id));
    prev = std::move(path);
  }
  return table;
}

Status ReadDataFileIndex(FieldReader& r, const std::vector<DataFileId>& table,
                         DataFileId* out, std::string_view field) {
  uint64_t index;
  CAIRN_RETURN_IF_ERROR(r.Varint64(&index, field));
  if (index >= table.size()) {
    return r.Error(StrCat("`", field, "` = ", std::to_string(index),
                          " is out of range for a data file table of ",
                          std::to_string(table.size()), " files"));
  }
  *out = table[index];
  return Status::OK();
}

}  // namespace cairn::ocdbt
