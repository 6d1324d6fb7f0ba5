// Reading many values at once (OcdbtKvStore::GetMany): out-of-line values
// that lie close together in one data file are fetched with one large read
// (coalescing, as TensorStore's read coalescing does), many reads in flight
// on a thread pool; the values are handed out as slices of those reads, so
// no byte is copied after the read.
//
// Thread safety: stateless; as thread-safe as `read`.
#pragma once

#include <cstdint>
#include <functional>
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
// With one read per I/O thread in flight, this bounds what a batch holds.
inline constexpr uint64_t kCoalesceMaxBytes = uint64_t{8} << 20;

// Bytes [begin, end) of a value (relative to its start; REQUIRES: end <=
// value->size()). `value` must outlive the call.
struct ValuePart {
  const LeafValue* value = nullptr;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Receives part i's bytes; `owner` is null for inline values (the bytes
// are then the leaf's own and valid only during the call).
using ValuePartFn = std::function<Status(size_t index, SharedBytes bytes)>;

// Reads every part and hands it to `fn` as soon as its read is done: inline
// parts first, on the calling thread, then out-of-line parts from the
// pool's threads (concurrently), coalesced as above. A read buffer is freed
// as soon as `fn` returned for its parts (unless `fn` kept the owner).
// Errors: the first of `read` or `fn`; later runs are then skipped.
Status StreamValues(const std::vector<ValuePart>& parts, const ReadObjectFn& read, ThreadPool& pool,
                    const ValuePartFn& fn);

// Returns the bytes of every value, out[i] for values[i]. Errors: the first
// error of `read` (DataLoss for references outside their file).
Result<std::vector<SharedBytes>> ReadValues(const std::vector<LeafValue>& values,
                                            const ReadObjectFn& read, ThreadPool& pool);

}  // namespace cairn::ocdbt
