// The mapped window of restore_host_share.h: when every process of a host
// that needs a shared chunk takes its box as a mapping (the replicas of a
// shard restoring the sharding they saved), the host's processes decode each
// chunk once into a window that is not reused, and each maps its chunks'
// pages instead of copying them into fresh memory. Threads stand in for the
// processes, a ThreadGroup for their coordinator.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"
#include "cairn/engine/testing/save_helpers.h"
#include "cairn/engine/testing/thread_coordinator.h"

namespace cairn::engine {
namespace {
using namespace testing;  // NOLINT: the save helpers

constexpr Index kRows = 512, kCols = 256, kChunkRows = 64;  // 8 chunks of 64 KiB
constexpr size_t kChunks = kRows / kChunkRows;
constexpr size_t kChunkElements = static_cast<size_t>(kChunkRows * kCols);

struct Saved {
  std::string dir;
  std::vector<float> w;
};

// A checkpoint saved by rows (one chunk per kChunkRows rows), zstd.
Saved SaveByRows(const std::string& name) {
  Saved s{TempDir(name) + "/item", Iota(static_cast<size_t>(kRows * kCols), 0.5f)};
  for (size_t i = 0; i < s.w.size(); i += 5) s.w[i] = -s.w[i];
  SaveRowChunks(s.dir, s.w, kRows, kCols, kChunkRows);
  return s;
}

struct Outcome {
  Status status;
  RestoreStats stats;
  std::vector<float> got;                             // the boxes' buffers, chunk after chunk
  std::vector<std::shared_ptr<MappedBytes>> mapped;   // per chunk: its mapping, or null
};

// Every process restores every chunk, each as one box of its own (as the
// replicas of a shard do); process i asks for mappings when `maps(i)`.
std::vector<Outcome> RestoreEveryChunk(const Saved& s, int processes, const std::string& shm,
                                       uint64_t max_bytes, const std::function<bool(int)>& maps) {
  ThreadGroup group(processes);
  std::vector<Outcome> out(static_cast<size_t>(processes));
  std::vector<std::thread> threads;
  for (int i = 0; i < processes; ++i) {
    threads.emplace_back([&, i] {
      Outcome& o = out[static_cast<size_t>(i)];
      o.got.assign(kChunks * kChunkElements, -1.0f);
      o.mapped.resize(kChunks);
      RestoreRequest q;
      q.directory = s.dir;
      ArrayToRestore a;
      a.param = "params.w";
      for (size_t c = 0; c < kChunks; ++c) {
        BoxToRestore b{Box({static_cast<Index>(c) * kChunkRows, 0}, {kChunkRows, kCols}),
                       o.got.data() + c * kChunkElements, {}};
        if (maps(i)) b.mapped = &o.mapped[c];
        a.boxes.push_back(b);
      }
      q.arrays = {a};
      q.coordinator = &group.Member(i);
      q.host_share.directory = shm;
      q.host_share.max_bytes = max_bytes;
      q.stats = &o.stats;
      o.status = Restore(q);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Chunk c's elements as restored: from its mapping when there is one (its
// buffer must then be untouched), else from its buffer.
const float* ChunkOf(const Outcome& o, size_t c) {
  if (o.mapped[c] == nullptr) return o.got.data() + c * kChunkElements;
  EXPECT_EQ(o.mapped[c]->size(), kChunkElements * sizeof(float));
  EXPECT_EQ(o.got[c * kChunkElements], -1.0f) << "chunk " << c << " was mapped and filled";
  return reinterpret_cast<const float*>(o.mapped[c]->data());
}

void ExpectEveryChunk(const Saved& s, const Outcome& o, int i) {
  ASSERT_TRUE(o.status.ok()) << "process " << i << ": " << o.status.ToString();
  for (size_t c = 0; c < kChunks; ++c) {
    const float* got = ChunkOf(o, c);
    for (size_t k = 0; k < kChunkElements; ++k) {
      ASSERT_EQ(got[k], s.w[c * kChunkElements + k]) << "process " << i << " chunk " << c << " element " << k;
    }
  }
}

TEST(RestoreHostShareMapped, ReplicasMapTheChunksTheHostDecodedOnceInOneRoundWhateverTheWindowSize) {
  const Saved s = SaveByRows("host_share_mapped");
  const std::string shm = TempDir("host_share_mapped_shm");
  // A window of 3 chunks would take 3 rounds; mapped, it is not reused.
  std::vector<Outcome> out = RestoreEveryChunk(s, 2, shm, 3 * (64 << 10) + 100, [](int) { return true; });
  int64_t decoded = 0;
  for (int i = 0; i < 2; ++i) {
    const Outcome& o = out[static_cast<size_t>(i)];
    ExpectEveryChunk(s, o, i);
    EXPECT_EQ(o.stats.host_share_rounds, 1) << "process " << i;
    EXPECT_EQ(o.stats.chunks_decoded_for_host + o.stats.chunks_from_host, 8) << "process " << i;
    EXPECT_EQ(o.stats.chunks_mapped_from_host, 8) << "process " << i;
    EXPECT_EQ(o.stats.chunks_read, 0) << "process " << i;
    for (size_t c = 0; c < kChunks; ++c) EXPECT_NE(o.mapped[c], nullptr) << "process " << i << " chunk " << c;
    decoded += o.stats.chunks_decoded_for_host;
  }
  EXPECT_EQ(decoded, 8) << "each chunk is decoded once on the host";
  // The window's name is gone; the mappings hold its pages.
  EXPECT_EQ(FilesIn(shm), 0u);
  // Copy-on-write: one process writing its array leaves the other's as restored.
  float* first = reinterpret_cast<float*>(out[0].mapped[3]->data());
  const float before = first[7];
  first[7] = 12345.0f;
  EXPECT_EQ(reinterpret_cast<const float*>(out[1].mapped[3]->data())[7], before);
  EXPECT_EQ(before, s.w[3 * kChunkElements + 7]);
}

TEST(RestoreHostShareMapped, OneProcessThatFillsItsBuffersKeepsTheReusedWindowAndEveryCopy) {
  const Saved s = SaveByRows("host_share_unmapped");
  const std::string shm = TempDir("host_share_unmapped_shm");
  std::vector<Outcome> out =
      RestoreEveryChunk(s, 2, shm, 3 * (64 << 10) + 100, [](int i) { return i == 0; });
  for (int i = 0; i < 2; ++i) {
    const Outcome& o = out[static_cast<size_t>(i)];
    ExpectEveryChunk(s, o, i);
    EXPECT_EQ(o.stats.host_share_rounds, 3) << "process " << i;
    EXPECT_EQ(o.stats.chunks_mapped_from_host, 0) << "process " << i;
    EXPECT_EQ(o.stats.chunks_decoded_for_host + o.stats.chunks_from_host, 8) << "process " << i;
    for (size_t c = 0; c < kChunks; ++c) EXPECT_EQ(o.mapped[c], nullptr) << "process " << i << " chunk " << c;
  }
  EXPECT_EQ(FilesIn(shm), 0u);
}

TEST(RestoreHostShareMapped, WithoutRoomToShareEveryProcessReadsItsOwnChunksAndNothingIsMapped) {
  const Saved s = SaveByRows("host_share_mapped_room");
  // /proc reports no free bytes: no window, so every process reads and
  // decodes its chunks into its own buffers.
  std::vector<Outcome> out = RestoreEveryChunk(s, 2, "/proc", uint64_t{1} << 30, [](int) { return true; });
  for (int i = 0; i < 2; ++i) {
    const Outcome& o = out[static_cast<size_t>(i)];
    ExpectEveryChunk(s, o, i);
    EXPECT_EQ(o.stats.chunks_mapped_from_host, 0) << "process " << i;
    EXPECT_EQ(o.stats.chunks_read, 8) << "process " << i;
  }
}

}  // namespace
}  // namespace cairn::engine
