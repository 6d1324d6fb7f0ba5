// Data file ids, indirect data references and the data file table that every
// manifest and node carries (docs/formats/ocdbt.md).
//
// In memory every DataFileId is fully resolved: its base_path already holds
// the transitive prefix of the node it was read from, so
// `base_path + relative_path` is the object's path under the database root.
//
// Pure functions: no I/O, no threads. Thread safety: value types.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/ocdbt/format/field_reader.h"
#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn::ocdbt {

inline constexpr uint64_t kMaxPathLength = 65535;

struct DataFileId {
  std::string base_path;
  std::string relative_path;

  std::string FullPath() const { return base_path + relative_path; }
  auto operator<=>(const DataFileId&) const = default;
};

// A byte range [offset, offset + length) of a data file.
struct IndirectDataReference {
  DataFileId file_id;
  uint64_t offset = 0;
  uint64_t length = 0;

  // The reference used for the root of an empty tree.
  static IndirectDataReference Missing() { return {{}, ~uint64_t{0}, ~uint64_t{0}}; }
  bool IsMissing() const { return offset == ~uint64_t{0} && length == ~uint64_t{0}; }
  bool operator==(const IndirectDataReference&) const = default;
  // "d/abc@[10,+33)" for errors.
  std::string ToString() const;
};

// DataLoss unless offset + length does not overflow and is <= 2^63 - 1.
// The Missing reference is accepted only when `allow_missing`.
Status ValidateIndirectDataReference(const IndirectDataReference& ref, bool allow_missing,
                                     const FieldReader& at);

// Collects the DataFileIds a node or manifest refers to, then encodes them as
// TensorStore does (deduplicated, sorted by (base_path, relative_path),
// prefix-compressed) and maps each id to its index.
class DataFileTableBuilder {
 public:
  void Add(const DataFileId& id) { index_.emplace(id, 0); }
  // Encodes the table with paths relative to `transitive_path` (every added
  // base_path must start with it). Must be called before Index().
  void Encode(std::string_view transitive_path, Buffer* out);
  // REQUIRES: `id` was added and Encode was called.
  uint64_t Index(const DataFileId& id) const { return index_.at(id); }

 private:
  std::map<DataFileId, uint64_t> index_;
};

// Decodes a data file table; `transitive_path` is prepended to every base
// path. Errors: DataLoss for bad lengths, counts, a base/prefix mismatch, a
// path over 65535 bytes, or a path that is absolute or has a ".." component.
Result<std::vector<DataFileId>> DecodeDataFileTable(FieldReader& r,
                                                    std::string_view transitive_path);

// Reads a varint64 index into `table`; DataLoss when out of range.
Status ReadDataFileIndex(FieldReader& r, const std::vector<DataFileId>& table,
                         DataFileId* out, std::string_view field);

}  // namespace cairn::ocdbt
