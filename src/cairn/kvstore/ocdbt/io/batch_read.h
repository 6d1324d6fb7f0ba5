// Reading many values at once (OcdbtKvStore::GetMany): out-of-line values
// that lie close together in one data file are fetched with one large read
// (coalescing, as TensorStore's read coalescing does), many reads in flight
// on a thread pool; the values are handed out as slices of those reads, so
// no byte is copied after the read.
//
// Thread safety: stateless; as thread-safe as `read`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/kvstore/ocdbt/format/btree.h"
#include "cairn/kvstore/ocdbt/io/reader.h"
#include "cairn/util/thread_pool.h"

namespace cairn::ocdbt {

// Bytes kept alive by `owner` (a coalesced read, or the inline-value arena).
struct SharedBytes {
  std::shared_ptr<const void> owner;
  const uint8_t* data = nullptr;
  size_t size = 0;

  ByteView view() const { return ByteView(data, size); }
  std::string ToString() const {
    return size == 0 ? std::string() : std::string(reinterpret_cast<const char*>(data), size);
  }
};

// Reads coalesce across gaps of at most this many bytes ...
inline constexpr uint64_t kCoalesceGapBytes = uint64_t{64} << 10;
// ... into reads of at most this many bytes (a larger value is one read).
inline constexpr uint64_t kCoalesceMaxBytes = uint64_t{32} << 20;

// Returns the bytes of every value, out[i] for values[i]. Errors: the first
// error of `read` (DataLoss for references outside their file).
Result<std::vector<SharedBytes>> ReadValues(const std::vector<LeafValue>& values,
                                            const ReadObjectFn& read, ThreadPool& pool);

}  // namespace cairn::ocdbt
