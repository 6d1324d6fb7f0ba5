// Large ranged reads of values not in the page cache go through O_DIRECT
// (file_kvstore.cc): the bytes match, and the page cache stays empty, while
// the same reads with use_direct_io off fill it (the control).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/posix_io.h"

namespace cairn {
namespace {

constexpr size_t kValueBytes = (size_t{3} << 20) + 1234;  // not a whole number of blocks

Buffer Pattern() {
  Buffer b(kValueBytes);
  for (size_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<uint8_t>((i * 7919) >> 3);
  return b;
}

class FileDirectReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/cairn_direct_read_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    FileKvStore writer(dir_);
    ASSERT_TRUE(writer.Put("d/value", Pattern()).ok());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Drops the value's pages from the page cache; false where the file
  // system keeps them (tmpfs: the cache is the storage).
  bool Evict() {
    int fd = ::open((dir_ + "/d/value").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    const bool evicted = file_internal::CachedPages(fd, 0, kValueBytes) == 0;
    ::close(fd);
    return evicted;
  }
  int64_t Cached() {
    int fd = ::open((dir_ + "/d/value").c_str(), O_RDONLY | O_CLOEXEC);
    int64_t n = file_internal::CachedPages(fd, 0, kValueBytes);
    ::close(fd);
    return n;
  }

  std::string dir_;
};

TEST_F(FileDirectReadTest, ColdRangesAreReadExactlyWithoutFillingThePageCache) {
  if (!Evict()) GTEST_SKIP() << dir_ << " keeps its pages in memory (tmpfs?)";
  const Buffer want = Pattern();
  FileKvStore store(dir_);
  // Unaligned starts and ends, the file's unaligned end, the whole value.
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = {
      {1, (2 << 20) + 3}, {4096, (1 << 20) + 4096}, {5000, kValueBytes - 5000}, {0, kValueBytes},
      {kValueBytes - (1 << 20) - 1, (1 << 20) + 1}};
  for (auto [begin, length] : ranges) {
    auto got = store.Get("d/value", ByteRange::Range(begin, length));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(got->has_value());
    ASSERT_EQ((*got)->size(), length) << begin;
    EXPECT_EQ(std::memcmp((*got)->data(), want.data() + begin, length), 0) << begin << "+" << length;
  }
  auto whole = store.Get("d/value");
  ASSERT_TRUE(whole.ok() && whole->has_value());
  EXPECT_TRUE(**whole == want);
  EXPECT_EQ(Cached(), 0) << "a cold large read went through the page cache";

  // Control: the same read through the page cache fills it.
  FileKvStoreOptions buffered;
  buffered.use_direct_io = false;
  FileKvStore control(dir_, buffered);
  auto again = control.Get("d/value", ByteRange::Range(5000, kValueBytes - 5000));
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ(std::memcmp((*again)->data(), want.data() + 5000, kValueBytes - 5000), 0);
  EXPECT_GT(Cached(), 0);
}

TEST_F(FileDirectReadTest, CachedAndSmallRangesReadThroughThePageCache) {
  if (!Evict()) GTEST_SKIP() << dir_ << " keeps its pages in memory (tmpfs?)";
  const Buffer want = Pattern();
  FileKvStore store(dir_);
  // Small: below direct_read_min_bytes.
  auto small = store.Get("d/value", ByteRange::Range(10, 100000));
  ASSERT_TRUE(small.ok() && small->has_value());
  EXPECT_EQ(std::memcmp((*small)->data(), want.data() + 10, 100000), 0);
  EXPECT_GT(Cached(), 0);
  // Warm: a whole read fills the cache, and the next large read uses it.
  FileKvStoreOptions buffered;
  buffered.use_direct_io = false;
  ASSERT_TRUE(FileKvStore(dir_, buffered).Get("d/value").ok());
  const int64_t warm = Cached();
  auto got = store.Get("d/value", ByteRange::Range(3, kValueBytes - 3));
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(std::memcmp((*got)->data(), want.data() + 3, kValueBytes - 3), 0);
  EXPECT_EQ(Cached(), warm);
}

}  // namespace
}  // namespace cairn
