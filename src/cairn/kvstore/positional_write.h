// A capability some KvStore drivers offer beside the KvStore interface: a
// value written in place, piece by piece at given offsets, whose bytes stay
// under the key as they are written (there is no atomic commit). For
// receiving a large value resumably without staging it twice: the caller
// keeps its own record of which pieces it wrote and checked (a transfer's
// journal, emergency/dir_transfer.h) and must not let readers see the key
// before it is done (it writes below an uncommitted directory).
//
// Drivers: file (FileKvStore). Stores without it return nullptr from
// AsPositionalWriteStore; callers fall back to KvWriter.
//
// Thread safety: a store's OpenPositional is thread-safe; one PositionalFile
// is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

class PositionalFile {
 public:
  virtual ~PositionalFile() = default;
  // Writes `bytes` at `offset` (the value grows as needed). After an error
  // the value's contents past the last successful write are unspecified.
  virtual Status WriteAt(uint64_t offset, ByteView bytes) = 0;
  // Makes what was written durable (data, and the key's directory entry).
  virtual Status Sync() = 0;
};

class PositionalWriteStore {
 public:
  virtual ~PositionalWriteStore() = default;
  // Opens `key` for writing in place, creating it (and missing parent
  // directories) when absent; a longer existing value is first cut to
  // `keep_bytes`, so the value never holds bytes past what the caller
  // knows it wrote. Errors name the key.
  virtual Result<std::unique_ptr<PositionalFile>> OpenPositional(std::string_view key, uint64_t keep_bytes) = 0;
};

// The capability of `store`, or nullptr.
inline PositionalWriteStore* AsPositionalWriteStore(KvStore* store) {
  return dynamic_cast<PositionalWriteStore*>(store);
}

}  // namespace cairn
