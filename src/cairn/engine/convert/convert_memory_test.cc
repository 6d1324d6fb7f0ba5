// The converter's memory accounting (convert_memory.h): slabs are charged
// the codec buffers their reader and writer hold, and the block cache of
// freed buffers stays within its share of the budget while converting.
#include "cairn/engine/convert/convert_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cairn/engine/convert/convert.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/util/buffer.h"
#include "cairn/util/buffer_cache.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

constexpr uint64_t kMiB = uint64_t{1} << 20;

ArrayInfo Info(std::string path, Shape shape, Shape write_shape) {
  return ArrayInfo{path, DType::kFloat32, shape, write_shape, 0, layout::SplitTreePath(path, '/')};
}

TEST(ConvertMemory, CodecBytesAreTwoChunksForZarrFormatsAndNoneForSafetensors) {
  const ArrayInfo a = Info("w", {1024, 256}, {64, 256});
  EXPECT_EQ(CodecBytes("axlearn", a), 2 * 64 * 256 * 4 + kCodecSlackBytes);
  EXPECT_EQ(CodecBytes("orbax", a), 2 * 64 * 256 * 4 + kCodecSlackBytes);
  EXPECT_EQ(CodecBytes("safetensors", a), 0u);
  ArrayMapping m{a, a};
  EXPECT_EQ(SlabCharge(m, 100, "axlearn", "safetensors"), 400 + CodecBytes("axlearn", a));
  m.dest.dtype = DType::kBFloat16;  // a cast holds both
  EXPECT_EQ(SlabCharge(m, 100, "safetensors", "safetensors"), 600u);
  EXPECT_EQ(SlabShare(512 * kMiB) + BlockCacheShare(512 * kMiB), 512 * kMiB);
}

TEST(ConvertMemory, ChargesStayWithinTheBudgetAndTheCacheWithinItsShare) {
  auto store = std::make_shared<MemoryKvStore>();
  // 4 arrays of 1 MiB in chunks of 256 KiB.
  std::vector<ArrayInfo> arrays;
  for (int i = 0; i < 4; ++i) arrays.push_back(Info("w" + std::to_string(i), {1024, 256}, {256, 256}));
  {
    axlearn::WriterOptions o;
    auto writer = axlearn::CreateWriter(store, "src", arrays, o);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    for (const ArrayInfo& a : arrays) {
      auto data = testing::RandomFloatBytes(1024 * 256, 7);
      ASSERT_TRUE((*writer)->WriteBox(a.path, Box::FromShape(a.shape), data.data()).ok());
    }
    ASSERT_TRUE((*writer)->Commit().ok());
  }
  auto source = axlearn::OpenReader(store, "src");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const size_t cache_before = SetBufferBlockCacheLimit(512 * kMiB);
  ConvertOptions options;
  options.plan.dest_separator = '/';
  options.memory_budget = 8 * kMiB;
  options.threads = 4;
  size_t cache_max = 0;
  options.progress = [&](const ConvertProgress&) {
    cache_max = std::max(cache_max, BufferBlockCacheBytes());
  };
  auto make = [&](const std::vector<ArrayInfo>& planned) {
    return axlearn::CreateWriter(store, "dst", planned, {});
  };
  auto stats = Convert(**source, make, [&] { return axlearn::OpenReader(store, "dst"); }, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_LE(cache_max, BlockCacheShare(options.memory_budget));
  // Each slab (a 256 KiB chunk) is charged its bytes and four chunks of
  // codec buffers: 1.25 MiB plus slack; the budget's 6 MiB hold four.
  const uint64_t one = SlabCharge(ArrayMapping{arrays[0], arrays[0]}, 256 * 256, "axlearn", "axlearn");
  EXPECT_GE(stats->peak_slab_bytes, one);
  EXPECT_LE(stats->peak_slab_bytes, SlabShare(options.memory_budget));
  // The cache's limit is back as it was.
  EXPECT_EQ(SetBufferBlockCacheLimit(cache_before), 512 * kMiB);
}

}  // namespace
}  // namespace cairn::engine
