// How a streamed writer's part buffer grows (s3/s3_writer.cc,
// gcs/gcs_writer.cc), shared so both grow alike.
#pragma once

#include <algorithm>
#include <cstdint>

namespace cairn::http {

// The capacity to reserve for a part buffer of `capacity` bytes that must
// hold `need`, at most `limit` (the part's size): doubling, but one block of
// 64 MiB once past 1 MiB, as the default KvWriter grows its value
// (kvstore.cc). An OCDBT data file of 64 MiB grown from 2 MiB by doubling
// would cost 62 MiB of copies and 126 MiB of fresh pages.
inline uint64_t PartBufferCapacity(uint64_t need, uint64_t capacity, uint64_t limit) {
  uint64_t grow = std::max<uint64_t>(need, 2 * capacity);
  if (need >= (uint64_t{1} << 20)) grow = std::max<uint64_t>(grow, uint64_t{64} << 20);
  return std::min<uint64_t>(limit, grow);
}

}  // namespace cairn::http
