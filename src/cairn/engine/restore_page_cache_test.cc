// A restore whose chunks no other process reads bypasses the page cache for
// its large reads (O_DIRECT); one that shares a chunk with another process
// reads through it, so the processes of one host read the device once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"
#include "cairn/engine/testing/save_helpers.h"
#include "cairn/kvstore/file/posix_io.h"
#include "cairn/coordinator.h"
#include "cairn/engine/testing/thread_coordinator.h"

#include <thread>

namespace cairn::engine {
namespace {
namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the save helpers

constexpr Index kRows = 1024, kCols = 1024;  // 4 MiB, chunks of 256 rows (1 MiB)

// Drops every file of `dir` from the page cache; false where the file
// system keeps its pages (tmpfs).
bool Evict(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    const bool evicted = file_internal::CachedPages(fd, 0, e.file_size()) == 0;
    ::close(fd);
    if (!evicted) return false;
  }
  return true;
}

// Pages in the page cache of the files of 1 MiB or more under `dir` (the
// OCDBT data files; metadata is read through the cache whatever happens).
int64_t CachedDataPages(const std::string& dir) {
  int64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.file_size() < (1u << 20)) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    n += file_internal::CachedPages(fd, 0, e.file_size());
    ::close(fd);
  }
  return n;
}

TEST(RestorePageCache, OnlyReadsSharedWithOtherProcessesGoThroughIt) {
  const std::string dir = TempDir("page_cache") + "/item";
  std::vector<float> w = Iota(static_cast<size_t>(kRows * kCols), 0.5f);
  SaveRequest r;
  r.directory = dir;
  r.options.compression = Compression::kNone;
  SaveLeaf leaf = ArrayLeaf("w", {kRows, kCols}, {256, kCols});
  for (Index row = 0; row < kRows; row += 256) {
    leaf.shards.push_back(Shard(w, {kRows, kCols}, Box({row, 0}, {256, kCols})));
  }
  r.leaves = {leaf};
  auto coordinator = NewSingleProcessCoordinator();
  ASSERT_TRUE(Save(r, *coordinator).ok());
  if (!Evict(dir)) GTEST_SKIP() << dir << " keeps its pages in memory (tmpfs?)";

  // This process restores the first half; another one the second half.
  auto restore = [&](Box other) {
    std::vector<float> got(static_cast<size_t>(kRows / 2 * kCols), -1.0f);
    RestoreRequest q;
    q.directory = dir;
    ArrayToRestore a;
    a.param = "params.w";
    a.boxes.push_back({Box({0, 0}, {kRows / 2, kCols}), got.data(), {}});
    a.boxes_of_other_processes = {std::move(other)};
    q.arrays = {a};
    Status s = Restore(q);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), w.begin()));
  };
  restore(Box({kRows / 2, 0}, {kRows / 2, kCols}));
  EXPECT_EQ(CachedDataPages(dir), 0) << "reads no other process shares went through the page cache";

  // The other process's half now starts inside a chunk this one reads.
  ASSERT_TRUE(Evict(dir));
  restore(Box({kRows / 2 - 1, 0}, {kRows / 2 + 1, kCols}));
  EXPECT_GT(CachedDataPages(dir), 0) << "shared reads bypassed the page cache";
  fs::remove_all(fs::path(dir).parent_path());
}

TEST(RestorePageCache, ChunksTheHostDecodesOnceAreReadOnceAroundIt) {
  // Compressed (host-shared decoding takes only chunks whose codecs change
  // the bytes), 2 chunks of 512 rows (2 MiB); two processes each restore half the
  // columns, so both need every chunk.
  const std::string dir = TempDir("page_cache_host_share") + "/item";
  std::vector<float> w = Iota(static_cast<size_t>(kRows * kCols), 0.5f);
  uint32_t x = 12345;  // bits that do not compress: the data files stay large
  for (float& v : w) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<float>(x >> 8) * 1e-3f;
  }
  SaveRequest r;
  r.directory = dir;
  SaveLeaf leaf = ArrayLeaf("w", {kRows, kCols}, {512, kCols});
  for (Index row = 0; row < kRows; row += 512) {
    leaf.shards.push_back(Shard(w, {kRows, kCols}, Box({row, 0}, {512, kCols})));
  }
  r.leaves = {leaf};
  auto single = NewSingleProcessCoordinator();
  ASSERT_TRUE(Save(r, *single).ok());
  if (!Evict(dir)) GTEST_SKIP() << dir << " keeps its pages in memory (tmpfs?)";
  auto run = [&](bool together) {
    testing::ThreadGroup group(2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        std::vector<float> got(static_cast<size_t>(kRows * kCols / 2), -1.0f);
        RestoreRequest q;
        q.directory = dir;
        ArrayToRestore a;
        a.param = "params.w";
        a.boxes.push_back({Box({0, i * kCols / 2}, {kRows, kCols / 2}), got.data(), {}});
        a.boxes_of_other_processes = {Box({0, (1 - i) * kCols / 2}, {kRows, kCols / 2})};
        q.arrays = {a};
        if (together) q.coordinator = &group.Member(i);
        Status s = Restore(q);
        EXPECT_TRUE(s.ok()) << s.ToString();
        for (Index row = 0; row < kRows; ++row) {
          for (Index c = 0; c < kCols / 2; ++c) {
            ASSERT_EQ(got[static_cast<size_t>(row * kCols / 2 + c)], w[static_cast<size_t>(row * kCols + i * kCols / 2 + c)]);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
  };
  run(/*together=*/false);
  EXPECT_GT(CachedDataPages(dir), 0) << "two processes reading the same chunks bypassed the page cache";
  ASSERT_TRUE(Evict(dir));
  run(/*together=*/true);
  EXPECT_EQ(CachedDataPages(dir), 0) << "chunks decoded once for the host went through the page cache";
  fs::remove_all(fs::path(dir).parent_path());
}

}  // namespace
}  // namespace cairn::engine
