// Restoring by mapping (BoxToRestore::mapped): a box that is one whole
// stored chunk, uncompressed, page-aligned in its data file on a RAM disk,
// is handed out as the chunk's own pages; every other box is filled as
// before.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cairn/coordinator.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"
#include "cairn/engine/testing/save_helpers.h"
#include "cairn/util/testing/flip_bytes.h"
#include "cairn/util/testing/proc_maps.h"

namespace cairn::engine {
namespace {

using ::cairn::testing::IsRamDisk;
using ::cairn::testing::MappedPath;
namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the save helpers

// 16 chunks of 2 rows x 1000 float32 (8000 bytes: packed back to back, all
// but the first value of each data file start off a page boundary).
constexpr Index kRows = 32, kCols = 1000, kChunkRows = 2;
constexpr Index kChunks = kRows / kChunkRows;
constexpr float kSentinel = -7.0f;

// A fresh directory under `base`, removed by the caller.
std::string FreshDir(const std::string& base) {
  std::string pattern = base + "/cairn_restore_mapped_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

class RestoreMapped : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    for (const std::string& d : dirs_) fs::remove_all(d, ec);
  }

  // Saves `w_` as an item under a fresh directory of `base`.
  std::string SaveItem(const std::string& base, Compression compression, uint64_t alignment) {
    const std::string top = FreshDir(base);
    EXPECT_FALSE(top.empty());
    dirs_.push_back(top);
    SaveRequest r;
    r.directory = top + "/item";
    r.options.compression = compression;
    r.local_tier.ocdbt_value_alignment = alignment;
    SaveRowChunks(r, w_, kRows, kCols, kChunkRows);
    return r.directory;
  }

  // Restores one box per chunk into `dest` (kRows x kCols), each asking for
  // a mapping into mapped[chunk].
  Status RestoreEveryChunk(const std::string& item, std::vector<float>& dest,
                           std::vector<std::shared_ptr<MappedBytes>>& mapped) {
    const size_t per = static_cast<size_t>(kChunkRows * kCols);
    mapped.assign(kChunks, nullptr);
    RestoreRequest q;
    q.directory = item;
    ArrayToRestore a;
    a.param = "params.w";
    for (Index c = 0; c < kChunks; ++c) {
      a.boxes.push_back({Box({c * kChunkRows, 0}, {kChunkRows, kCols}), dest.data() + c * per, {}, &mapped[c]});
    }
    q.arrays = {a};
    return Restore(q);
  }

  // Restores one box per chunk, each asking for a mapping. Checks every
  // box's elements (from the mapping or the destination) and returns how
  // many were mapped; mapped boxes' destinations must be untouched.
  int RestoreChunks(const std::string& item, std::vector<std::shared_ptr<MappedBytes>>& mapped) {
    const size_t per = static_cast<size_t>(kChunkRows * kCols);
    std::vector<float> dest(static_cast<size_t>(kRows * kCols), kSentinel);
    Status s = RestoreEveryChunk(item, dest, mapped);
    EXPECT_TRUE(s.ok()) << s.ToString();
    int n = 0;
    for (Index c = 0; c < kChunks; ++c) {
      const float* want = w_.data() + c * per;
      if (mapped[c] != nullptr) {
        ++n;
        EXPECT_EQ(mapped[c]->size(), per * sizeof(float));
        EXPECT_EQ(std::memcmp(mapped[c]->data(), want, per * sizeof(float)), 0) << "chunk " << c;
        EXPECT_EQ(dest[c * per], kSentinel) << "a mapped box's destination is not written";
      } else {
        EXPECT_TRUE(std::equal(want, want + per, dest.data() + c * per)) << "chunk " << c;
      }
    }
    return n;
  }

  std::vector<float> w_ = Iota(static_cast<size_t>(kRows * kCols), 0.25f);
  std::vector<std::string> dirs_;
};

TEST_F(RestoreMapped, WholeUncompressedAlignedChunksOnARamDiskAreTheFilesPagesAndSurviveDeletion) {
  ASSERT_TRUE(IsRamDisk("/dev/shm")) << "this machine has /dev/shm";
  const std::string item = SaveItem("/dev/shm", Compression::kNone, 4096);
  std::vector<std::shared_ptr<MappedBytes>> mapped;
  EXPECT_EQ(RestoreChunks(item, mapped), kChunks);
  for (const auto& m : mapped) {
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(MappedPath(m->data()).rfind(item + "/ocdbt.process_0/d/", 0), 0u) << MappedPath(m->data());
  }
  // The checkpoint deleted (a later save's retention): the pages stay.
  fs::remove_all(fs::path(item).parent_path());
  const size_t per = static_cast<size_t>(kChunkRows * kCols);
  for (Index c = 0; c < kChunks; ++c) {
    EXPECT_EQ(std::memcmp(mapped[c]->data(), w_.data() + c * per, per * sizeof(float)), 0);
    EXPECT_NE(MappedPath(mapped[c]->data()).find("(deleted)"), std::string::npos);
  }
  // Copy-on-write: the holder may write.
  reinterpret_cast<float*>(mapped[0]->data())[0] = 1.5f;
  EXPECT_EQ(reinterpret_cast<float*>(mapped[0]->data())[0], 1.5f);
}

TEST_F(RestoreMapped, WithoutAlignmentOnlyChunksThatHappenToStartOnAPageAreMapped) {
  const std::string item = SaveItem("/dev/shm", Compression::kNone, 0);
  std::vector<std::shared_ptr<MappedBytes>> mapped;
  const int n = RestoreChunks(item, mapped);
  EXPECT_LT(n, kChunks) << "at most a few data files, each with values packed back to back";
}

TEST_F(RestoreMapped, CompressedChunksAreRead) {
  const std::string item = SaveItem("/dev/shm", Compression::kOrbaxDefault, 4096);
  std::vector<std::shared_ptr<MappedBytes>> mapped;
  EXPECT_EQ(RestoreChunks(item, mapped), 0);
}

TEST_F(RestoreMapped, ChunksOnADiskAreRead) {
  std::string base = fs::temp_directory_path().string();
  if (IsRamDisk(base)) base = fs::current_path().string();
  ASSERT_FALSE(IsRamDisk(base)) << "the test needs a directory on a disk";
  const std::string item = SaveItem(base, Compression::kNone, 4096);
  std::vector<std::shared_ptr<MappedBytes>> mapped;
  EXPECT_EQ(RestoreChunks(item, mapped), 0);
}

TEST_F(RestoreMapped, BoxesThatAreNotOneWholeChunkAreFilled) {
  const std::string item = SaveItem("/dev/shm", Compression::kNone, 4096);
  // Two chunks in one box; half a chunk; a whole chunk without a slot; a
  // whole chunk with a slot (the control, mapped).
  std::vector<float> two(static_cast<size_t>(2 * kChunkRows * kCols), kSentinel);
  std::vector<float> half(static_cast<size_t>(kChunkRows * kCols / 2), kSentinel);
  std::vector<float> plain(static_cast<size_t>(kChunkRows * kCols), kSentinel);
  std::vector<float> control(static_cast<size_t>(kChunkRows * kCols), kSentinel);
  std::shared_ptr<MappedBytes> m_two, m_half, m_control;
  RestoreRequest q;
  q.directory = item;
  ArrayToRestore a;
  a.param = "params.w";
  a.boxes.push_back({Box({0, 0}, {2 * kChunkRows, kCols}), two.data(), {}, &m_two});
  a.boxes.push_back({Box({4, 0}, {kChunkRows, kCols / 2}), half.data(), {}, &m_half});
  a.boxes.push_back({Box({6, 0}, {kChunkRows, kCols}), plain.data(), {}});
  a.boxes.push_back({Box({8, 0}, {kChunkRows, kCols}), control.data(), {}, &m_control});
  q.arrays = {a};
  Status s = Restore(q);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(m_two, nullptr);
  EXPECT_EQ(m_half, nullptr);
  EXPECT_NE(m_control, nullptr);
  EXPECT_TRUE(std::equal(two.begin(), two.end(), w_.begin()));
  for (Index r = 0; r < kChunkRows; ++r) {
    for (Index c = 0; c < kCols / 2; ++c) {
      EXPECT_EQ(half[r * (kCols / 2) + c], w_[(4 + r) * kCols + c]);
    }
  }
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), w_.begin() + 6 * kCols));
  EXPECT_EQ(control[0], kSentinel);
}

// Uncompressed chunks end in their CRC-32C (the `crc32c` codec): a flipped
// byte in a mappable chunk is never handed out, mapped or read.
TEST_F(RestoreMapped, AFlippedByteInAMappableChunkIsRefusedNamingTheArray) {
  ASSERT_TRUE(IsRamDisk("/dev/shm")) << "this machine has /dev/shm";
  const std::string item = SaveItem("/dev/shm", Compression::kNone, 4096);
  // Chunk 3's elements, found in the data files by their bytes.
  const size_t per = static_cast<size_t>(kChunkRows * kCols);
  const std::string chunk3(reinterpret_cast<const char*>(w_.data() + 3 * per), 64);
  ASSERT_GE(cairn::testing::FlipByteOfEveryCopy(item, chunk3), 1);
  std::vector<float> dest(static_cast<size_t>(kRows * kCols), kSentinel);
  std::vector<std::shared_ptr<MappedBytes>> mapped;
  Status s = RestoreEveryChunk(item, dest, mapped);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.ToString().find("params.w"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("crc32c mismatch"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("w/c/3"), std::string::npos) << "names the chunk: " << s.ToString();
  EXPECT_NE(s.ToString().find("ocdbt.process_0/d/"), std::string::npos) << "names the file: " << s.ToString();
}

}  // namespace
}  // namespace cairn::engine
