// DataFileWriter: accumulates the blobs of one new data file (values, B+tree
// nodes, version-tree nodes) in memory; the caller writes it as one object.
//
// Thread safety: not thread-safe; one writer per commit.
#pragma once

#include <cstdint>
#include <string>

#include "cairn/kvstore/ocdbt/format/data_file.h"
#include "cairn/util/buffer.h"

namespace cairn::ocdbt {

class DataFileWriter {
 public:
  // A new file named `prefix` + 32 random lowercase hex digits.
  explicit DataFileWriter(std::string_view prefix = "d/");

  const DataFileId& id() const { return id_; }
  // Appends `bytes` and returns where they are.
  IndirectDataReference Append(ByteView bytes);
  const Buffer& contents() const { return data_; }
  bool empty() const { return data_.empty(); }

 private:
  DataFileId id_;
  Buffer data_;
};

}  // namespace cairn::ocdbt
