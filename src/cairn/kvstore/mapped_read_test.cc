// The mapped-read capability (mapped_read.h): the file driver maps files on
// a RAM disk only, at page-aligned offsets; the prefix and OCDBT drivers
// forward it; mappings stay intact after the key is deleted and are
// copy-on-write.
#include "cairn/kvstore/mapped_read.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/util/testing/proc_maps.h"

namespace cairn {
namespace {

using ::cairn::testing::IsRamDisk;
using ::cairn::testing::MappedPath;

std::shared_ptr<std::string> TempDir(const char* base) {
  std::string pattern = std::string(base) + "/cairn_mapped_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return nullptr;
  return std::shared_ptr<std::string>(new std::string(pattern), [](std::string* p) {
    std::error_code ec;
    std::filesystem::remove_all(*p, ec);
    delete p;
  });
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 12));
  return v;
}

bool Same(const MappedBytes& m, const uint8_t* expected, size_t n) {
  return m.size() == n && std::equal(m.data(), m.data() + n, expected);
}

TEST(MappedRead, FileOnRamDiskMapsAlignedRangesCopyOnWriteAndSurvivesDeletion) {
  auto dir = TempDir("/dev/shm");
  ASSERT_NE(dir, nullptr) << "this machine has /dev/shm";
  auto store = std::make_shared<FileKvStore>(*dir);
  const std::vector<uint8_t> value = Pattern(3 * 4096 + 100, 1);
  ASSERT_TRUE(store->Put("d/file", ByteView(value.data(), value.size())).ok());
  MappedReadStore* maps = AsMappedReadStore(store.get());
  ASSERT_NE(maps, nullptr);

  auto m = maps->MapRange("d/file", 4096, 2 * 4096 + 100);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_NE(*m, nullptr);
  EXPECT_TRUE(Same(**m, value.data() + 4096, 2 * 4096 + 100));
  EXPECT_EQ((*m)->value_size(), value.size());
  // The memory is the file's own mapping, not a copy.
  EXPECT_EQ(MappedPath((*m)->data()), *dir + "/d/file");

  // Writing into the mapping copies that page; the stored value is intact.
  (*m)->data()[0] ^= 0xff;
  auto stored = store->Get("d/file");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((**stored).view()[4096], value[4096]);
  (*m)->data()[0] ^= 0xff;

  // Deleting (unlinking) the key leaves the mapping's pages in place.
  ASSERT_TRUE(store->Delete("d/file").ok());
  ASSERT_TRUE(store->DeletePrefix("d/").ok());
  EXPECT_TRUE(Same(**m, value.data() + 4096, 2 * 4096 + 100));
  EXPECT_EQ(MappedPath((*m)->data()), *dir + "/d/file (deleted)");
}

TEST(MappedRead, FileRefusesUnalignedRangesAndNamesBadOnes) {
  auto dir = TempDir("/dev/shm");
  ASSERT_NE(dir, nullptr);
  FileKvStore store(*dir);
  const std::vector<uint8_t> value = Pattern(2 * 4096, 2);
  ASSERT_TRUE(store.Put("v", ByteView(value.data(), value.size())).ok());
  auto unaligned = store.MapRange("v", 100, 4096);
  ASSERT_TRUE(unaligned.ok());
  EXPECT_EQ(*unaligned, nullptr);
  auto aligned = store.MapRange("v", 0, 4096);  // control
  ASSERT_TRUE(aligned.ok());
  EXPECT_NE(*aligned, nullptr);
  EXPECT_EQ(store.MapRange("missing", 0, 1).status().code(), StatusCode::kNotFound);
  auto outside = store.MapRange("v", 4096, 4097);
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("v"), std::string_view::npos);
}

TEST(MappedRead, FileOnADiskDoesNotMap) {
  // /tmp, or else the working directory (the build tree), on a disk.
  std::string base = "/tmp";
  if (IsRamDisk(base)) base = std::filesystem::current_path().string();
  ASSERT_FALSE(IsRamDisk(base)) << "the test needs a directory on a disk";
  auto dir = TempDir(base.c_str());
  ASSERT_NE(dir, nullptr);
  FileKvStore store(*dir);
  const std::vector<uint8_t> value = Pattern(2 * 4096, 3);
  ASSERT_TRUE(store.Put("v", ByteView(value.data(), value.size())).ok());
  auto m = store.MapRange("v", 0, 4096);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, nullptr) << *dir << " is on a disk, where mapping is refused";
}

TEST(MappedRead, PrefixForwardsToItsBase) {
  auto dir = TempDir("/dev/shm");
  ASSERT_NE(dir, nullptr);
  auto file = std::make_shared<FileKvStore>(*dir);
  const std::vector<uint8_t> value = Pattern(4096, 4);
  ASSERT_TRUE(file->Put("a/b", ByteView(value.data(), value.size())).ok());
  auto view = MakePrefixKvStore(file, "a/");
  MappedReadStore* maps = AsMappedReadStore(view.get());
  ASSERT_NE(maps, nullptr);
  auto m = maps->MapRange("b", 0, 4096);
  ASSERT_TRUE(m.ok() && *m != nullptr);
  EXPECT_TRUE(Same(**m, value.data(), 4096));
}

// An OCDBT database on a RAM disk: `alignment` 0 packs values, 4096 aligns
// those of at least a page.
struct Db {
  std::shared_ptr<std::string> dir;
  std::shared_ptr<ocdbt::OcdbtKvStore> store;
};
Db OpenDb(const char* base, uint64_t alignment) {
  Db db;
  db.dir = TempDir(base);
  ocdbt::OcdbtOptions o;
  o.value_alignment = alignment;
  o.config.max_inline_value_bytes = 100;
  db.store = std::make_shared<ocdbt::OcdbtKvStore>(std::make_shared<FileKvStore>(*db.dir), o);
  return db;
}

TEST(MappedRead, OcdbtMapsAlignedValuesThroughItsBase) {
  Db db = OpenDb("/dev/shm", 4096);
  ASSERT_NE(db.dir, nullptr);
  const std::vector<uint8_t> a = Pattern(6000, 5), b = Pattern(6000, 6), small = Pattern(50, 7);
  std::vector<KvMutation> batch;
  batch.push_back({"a", Buffer::CopyOf(ByteView(a.data(), a.size()))});
  batch.push_back({"b", Buffer::CopyOf(ByteView(b.data(), b.size()))});
  batch.push_back({"small", Buffer::CopyOf(ByteView(small.data(), small.size()))});
  ASSERT_TRUE(db.store->ApplyBatch(std::move(batch)).ok());
  for (const auto& [key, bytes] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
    auto m = db.store->MapRange(key, 0, bytes->size());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_NE(*m, nullptr) << key << ": values of a page or more start on a page boundary";
    EXPECT_TRUE(Same(**m, bytes->data(), bytes->size())) << key;
    EXPECT_EQ((*m)->value_size(), bytes->size());
    EXPECT_NE(MappedPath((*m)->data()).find(*db.dir + "/d/"), std::string::npos);
  }
  // Reads see the same values (padding is outside every value).
  auto got = db.store->Get("b");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_TRUE(std::equal(b.begin(), b.end(), (**got).view().begin()));
  auto inline_value = db.store->MapRange("small", 0, small.size());
  ASSERT_TRUE(inline_value.ok());
  EXPECT_EQ(*inline_value, nullptr) << "inline values live in a node";
  EXPECT_EQ(db.store->MapRange("none", 0, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(db.store->MapRange("a", 0, a.size() + 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(MappedRead, OcdbtWithoutAlignmentPacksValuesSoTheSecondDoesNotMap) {
  Db db = OpenDb("/dev/shm", 0);
  ASSERT_NE(db.dir, nullptr);
  const std::vector<uint8_t> a = Pattern(6000, 8), b = Pattern(6000, 9);
  std::vector<KvMutation> batch;
  batch.push_back({"a", Buffer::CopyOf(ByteView(a.data(), a.size()))});
  batch.push_back({"b", Buffer::CopyOf(ByteView(b.data(), b.size()))});
  ASSERT_TRUE(db.store->ApplyBatch(std::move(batch)).ok());
  int mapped = 0;
  for (const char* key : {"a", "b"}) {
    auto m = db.store->MapRange(key, 0, 6000);
    ASSERT_TRUE(m.ok());
    mapped += *m != nullptr;
  }
  EXPECT_EQ(mapped, 1) << "packed back to back, only the value at offset 0 is page-aligned";
}

}  // namespace
}  // namespace cairn
