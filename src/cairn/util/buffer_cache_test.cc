// The block cache of freed large Buffers (buffer.h): bounded by its limit,
// which a caller can lower (the converter counts it in its budget).
#include <gtest/gtest.h>

#include "cairn/util/buffer.h"
#include "cairn/util/buffer_cache.h"

namespace cairn {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(BufferBlockCache, KeepsFreedBlocksWithinItsLimit) {
  const size_t previous = SetBufferBlockCacheLimit(64 * kMiB);
  SetBufferBlockCacheLimit(0);  // empty it
  SetBufferBlockCacheLimit(64 * kMiB);
  EXPECT_EQ(BufferBlockCacheBytes(), 0u);
  { Buffer b(4 * kMiB); }
  EXPECT_GE(BufferBlockCacheBytes(), 4 * kMiB);  // control: kept for reuse
  { Buffer small(4096); }
  EXPECT_LT(BufferBlockCacheBytes(), 5 * kMiB);  // small blocks are not kept

  // Lowering the limit frees what is beyond it, and keeps nothing new
  // beyond it.
  EXPECT_EQ(SetBufferBlockCacheLimit(2 * kMiB), 64 * kMiB);
  EXPECT_LE(BufferBlockCacheBytes(), 2 * kMiB);
  { Buffer b(3 * kMiB); }
  EXPECT_LE(BufferBlockCacheBytes(), 2 * kMiB);
  SetBufferBlockCacheLimit(previous);
}

}  // namespace
}  // namespace cairn
