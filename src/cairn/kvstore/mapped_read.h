// A capability some KvStore drivers offer beside the KvStore interface: a
// byte range of a value handed out as memory mapped from where the value
// lies, instead of copied. For restoring from a RAM disk (tmpfs, ramfs),
// where a file's pages already are memory: a private mapping of them costs
// minor faults, where a copy costs fresh pages and a pass over the bytes
// (docs/EMERGENCY.md, "Recovery time").
//
// A mapping is private (copy-on-write): the holder may write into it, the
// value stays as it was. It stays valid and unchanged after the key is
// deleted or replaced (an unlinked file keeps its pages while mapped), but
// not if the file were cut shorter in place (then touching the cut pages
// raises SIGBUS): drivers map only values that are never rewritten in
// place (the data files of OCDBT, committed local steps).
//
// MapRange answers nullptr (not an error) whenever it cannot map: the
// bytes are not in memory (a file system on a device, where a mapping
// would fault pages in from the device later, inside the caller's work),
// the range does not start on a page boundary of the file, the value is
// stored inline (OCDBT), or the store below has no such capability. The
// caller then reads as usual.
//
// Drivers: file (FileKvStore; files on tmpfs/ramfs only), prefix (forwards),
// ocdbt (resolves the key to its data file's range and forwards to its base
// store). Find it with AsMappedReadStore.
//
// Thread safety: MapRange may be called concurrently; a MappedBytes is
// immutable after creation (its pages belong to whoever writes them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

// A private mapping of `size()` bytes; unmapped when destroyed.
class MappedBytes {
 public:
  // Takes over the mapping [map_base, map_base + map_length); the bytes
  // start at `data` inside it. `value_size`: the size of the whole value
  // the bytes were mapped from.
  MappedBytes(void* map_base, size_t map_length, uint8_t* data, size_t size, uint64_t value_size)
      : map_base_(map_base), map_length_(map_length), data_(data), size_(size), value_size_(value_size) {}
  ~MappedBytes();
  MappedBytes(const MappedBytes&) = delete;
  MappedBytes& operator=(const MappedBytes&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  uint64_t value_size() const { return value_size_; }
  // The value's size seen by a store above (an OCDBT value inside a data
  // file of the store that mapped it).
  void set_value_size(uint64_t n) { value_size_ = n; }
  // Exposes only the first `n` bytes (REQUIRES: n <= size()); the whole
  // mapping is still unmapped at the end.
  void Shrink(size_t n) { size_ = n < size_ ? n : size_; }

 private:
  void* map_base_;
  size_t map_length_;
  uint8_t* data_;
  size_t size_;
  uint64_t value_size_;
};

class MappedReadStore {
 public:
  virtual ~MappedReadStore() = default;
  // Maps bytes [offset, offset + length) of `key`'s value, read-faulted in
  // already (populated without copying: the pages are the file's until
  // written). nullptr when this store cannot map them (above). Errors:
  // NotFound for a missing key; InvalidArgument for a range outside the
  // value; those of opening and mapping the file, naming the key.
  virtual Result<std::shared_ptr<MappedBytes>> MapRange(std::string_view key, uint64_t offset,
                                                        uint64_t length) = 0;
};

// The capability of `store`, or nullptr.
inline MappedReadStore* AsMappedReadStore(KvStore* store) { return dynamic_cast<MappedReadStore*>(store); }

}  // namespace cairn
