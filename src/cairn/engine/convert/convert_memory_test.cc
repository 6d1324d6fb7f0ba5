// The converter's memory accounting (convert_memory.h): slabs are charged
// the codec buffers their reader and writer hold, and the block cache of
// freed buffers stays within its share of the budget while converting.
#include "cairn/engine/convert/convert_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
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

TEST(ConvertMemory, TheCacheTakesWhatTheChargesInFlightLeaveOfTheBudget) {
  EXPECT_EQ(CacheShareBeside(512 * kMiB, 0), 512 * kMiB);
  EXPECT_EQ(CacheShareBeside(512 * kMiB, 100 * kMiB), 412 * kMiB);
  // Never less than its own share: charges stop at SlabShare.
  EXPECT_EQ(CacheShareBeside(512 * kMiB, SlabShare(512 * kMiB)), BlockCacheShare(512 * kMiB));
  EXPECT_EQ(CacheShareBeside(512 * kMiB, 600 * kMiB), BlockCacheShare(512 * kMiB));
}

TEST(ConvertMemory, ChargesAndTheCacheStayWithinTheBudget) {
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
  options.pass_stored_chunks = false;  // the charges of decoding and encoding are under test
  size_t cache_max = 0;
  options.progress = [&](const ConvertProgress&) {
    cache_max = std::max(cache_max, BufferBlockCacheBytes());
  };
  auto make = [&](const std::vector<ArrayInfo>& planned) {
    return axlearn::CreateWriter(store, "dst", planned, {});
  };
  auto stats = Convert(**source, make, [&] { return axlearn::OpenReader(store, "dst"); }, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  // Cached blocks may take what the charges in flight leave of the budget.
  EXPECT_LE(cache_max, options.memory_budget);
  // Each slab (a 256 KiB chunk) is charged its bytes and four chunks of
  // codec buffers: 1.25 MiB plus slack; the budget's 6 MiB hold four. A
  // chunk the reader hands over whole is charged less (itself and its
  // stored bytes), and on a loaded machine the workers may copy one such
  // chunk at a time: the peak is at least the smaller charge.
  const ArrayMapping m{arrays[0], arrays[0]};
  const uint64_t one = std::min(SlabCharge(m, 256 * 256, "axlearn", "axlearn"),
                                WholeChunkCharge(m, 256 * 256, "axlearn"));
  EXPECT_GE(stats->peak_slab_bytes, one);
  EXPECT_LE(stats->peak_slab_bytes, SlabShare(options.memory_budget));
  // The cache's limit is back as it was.
  EXPECT_EQ(SetBufferBlockCacheLimit(cache_before), 512 * kMiB);
}

// A memory store that counts and drops the chunks written under `dst/`:
// a copy kept in a Buffer would take blocks from the cache under test.
class DroppingChunksStore : public MemoryKvStore {
 public:
  Status Put(std::string_view key, ByteView value) override {
    const size_t slash = key.rfind('/');
    const bool chunk = key.substr(0, 4) == "dst/" && slash != std::string_view::npos &&
                       slash + 1 < key.size() && key[slash + 1] >= '0' && key[slash + 1] <= '9';
    if (chunk) {
      std::lock_guard lock(mu_);
      chunk_bytes_ += value.size();
      return Status::OK();
    }
    return MemoryKvStore::Put(key, value);
  }

  uint64_t chunk_bytes() {
    std::lock_guard lock(mu_);
    return chunk_bytes_;
  }

 private:
  std::mutex mu_;
  uint64_t chunk_bytes_ = 0;
};

// Chunk buffers are reused from chunk to chunk instead of being taken fresh
// from the allocator (fresh pages are page-faulted in, and zeroed by the
// kernel, one by one): 64 chunks of 2 MiB, each read (stored bytes),
// decoded and encoded by one worker, take fresh blocks for the first chunk
// only. The budget (16 MiB) is what one such chunk is fitted to; its
// quarter (the cache's cap before) held one of the two blocks a chunk
// frees, and each chunk took a fresh one (128 MiB in all).
TEST(ConvertMemory, ChunkBuffersAreReusedAcrossChunks) {
  auto store = std::make_shared<DroppingChunksStore>();
  // 32 arrays of 4 MiB in chunks of 2 MiB (the block cache keeps blocks of
  // 1 MiB and up; a chunk's stored bytes are about 1.9 MiB).
  std::vector<ArrayInfo> arrays;
  for (int i = 0; i < 32; ++i) arrays.push_back(Info("w" + std::to_string(i), {1024, 1024}, {512, 1024}));
  {
    auto writer = axlearn::CreateWriter(store, "src", arrays, {});
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    const auto data = testing::RandomFloatBytes(1024 * 1024, 11);
    for (const ArrayInfo& a : arrays) {
      ASSERT_TRUE((*writer)->WriteBox(a.path, Box::FromShape(a.shape), data.data()).ok());
    }
    ASSERT_TRUE((*writer)->Commit().ok());
  }
  auto source = axlearn::OpenReader(store, "src");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ConvertOptions options;
  options.plan.dest_separator = '/';
  options.memory_budget = 16 * kMiB;
  options.threads = 1;
  options.pass_stored_chunks = false;  // the buffers of decoding and encoding are under test
  auto make = [&](const std::vector<ArrayInfo>& planned) {
    return axlearn::CreateWriter(store, "dst", planned, {});
  };
  const uint64_t total_before = Buffer::TotalBytesAllocated();
  const uint64_t fresh_before = Buffer::FreshBytesAllocated();
  auto stats = Convert(**source, make, [&] { return axlearn::OpenReader(store, "dst"); }, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const uint64_t total = Buffer::TotalBytesAllocated() - total_before;
  const uint64_t fresh = Buffer::FreshBytesAllocated() - fresh_before;
  EXPECT_GT(store->chunk_bytes(), 64 * 3 * kMiB / 2);  // every chunk was written
  // Control: every chunk took its buffers (read, decoded, encoded: three
  // of about 2 MiB each), so the bound below is not met by not allocating.
  EXPECT_GE(total, 64 * 3 * 2 * kMiB - 64 * 256 * 1024);
  // Fresh: one chunk's three buffers, and some slack; not a share of the
  // 64 chunks.
  EXPECT_LE(fresh, 3 * 2 * kMiB + 4 * kMiB) << "of " << total / kMiB << " MiB allocated";
}

}  // namespace
}  // namespace cairn::engine
