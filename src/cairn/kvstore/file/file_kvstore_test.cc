#include "cairn/kvstore/file/file_kvstore.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstring>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cairn/kvstore/testing/conformance.h"
#include "cairn/util/testing/file_bytes.h"

namespace cairn {
namespace {
using ::cairn::testing::ReadFileBytes;

// A fresh directory, removed when the last reference goes away.
std::shared_ptr<std::string> TempDir(const char* base = "/tmp") {
  std::string pattern = std::string(base) + "/cairn_file_kv_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return nullptr;
  return std::shared_ptr<std::string>(new std::string(pattern), [](std::string* p) {
    std::error_code ec;
    std::filesystem::remove_all(*p, ec);
    delete p;
  });
}

// A FileKvStore in a fresh directory (the root itself is created on first
// write), deleting the directory with the store.
std::shared_ptr<KvStore> MakeStore(FileKvStoreOptions options = {}, const char* base = "/tmp") {
  auto dir = TempDir(base);
  if (!dir) return nullptr;
  auto* store = new FileKvStore(*dir + "/root", options);
  return std::shared_ptr<KvStore>(store, [dir](KvStore* s) { delete s; });
}

const bool kRegistered = RegisterKvStoreConformanceTests("FileConformance", [] {
  return MakeStore();
});
// Every value of 4 KiB or more through O_DIRECT (where the disk allows it),
// written and, where not cached, read.
const bool kRegisteredDirect = RegisterKvStoreConformanceTests("FileDirectConformance", [] {
  FileKvStoreOptions options;
  options.direct_io_min_bytes = 4096;
  options.direct_read_min_bytes = 4096;
  options.write_chunk_bytes = 1 << 20;
  return MakeStore(options);
});
// Every path through the component walk that kernels without openat2 use.
const bool kRegisteredWalk = RegisterKvStoreConformanceTests("FileWalkConformance", [] {
  auto store = MakeStore();
  const bool was = file_internal::SetOpenat2ForTesting(false);
  return std::shared_ptr<KvStore>(store.get(), [store, was](KvStore*) mutable {
    file_internal::SetOpenat2ForTesting(was);
    store.reset();
  });
});
const bool kRegisteredBuffered = RegisterKvStoreConformanceTests("FileBufferedConformance", [] {
  FileKvStoreOptions options;
  options.use_direct_io = false;
  return MakeStore(options);
});

TEST(FileKvStoreTest, OneFilePerKeyInSubdirectories) {
  auto dir = TempDir();
  ASSERT_TRUE(dir);
  FileKvStore store(*dir + "/ckpt/");
  EXPECT_EQ(store.url(), "file://" + *dir + "/ckpt/");
  ASSERT_TRUE(store.Put("params.w/c/0/1", AsBytes("chunk")).ok());
  ASSERT_TRUE(store.Put(".zarray", AsBytes("{}")).ok());
  EXPECT_EQ(ReadFileBytes(*dir + "/ckpt/params.w/c/0/1"), "chunk");
  EXPECT_EQ(ReadFileBytes(*dir + "/ckpt/.zarray"), "{}");
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(*dir)) {
    if (e.is_regular_file()) ++files;
  }
  EXPECT_EQ(files, 2);
}

// The positional-write capability (positional_write.h): pieces land at their
// offsets in the key's file (directories created), visible at once; reopening
// cuts the value to the bytes the caller kept; a symbolic link is refused.
TEST(FileKvStoreTest, WritesInPlaceAtOffsetsAndCutsToWhatWasKept) {
  auto dir = TempDir();
  ASSERT_TRUE(dir);
  FileKvStore store(*dir + "/ckpt/");
  PositionalWriteStore* positional = AsPositionalWriteStore(&store);
  ASSERT_NE(positional, nullptr);
  {
    auto file = positional->OpenPositional("a/b/data", 0);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    ASSERT_TRUE((*file)->WriteAt(0, AsBytes("hello ")).ok());
    ASSERT_TRUE((*file)->WriteAt(6, AsBytes("world")).ok());
    ASSERT_TRUE((*file)->Sync().ok());
  }
  EXPECT_EQ(ReadFileBytes(*dir + "/ckpt/a/b/data"), "hello world");
  {
    auto file = positional->OpenPositional("a/b/data", 6);  // keeps "hello "
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_EQ(ReadFileBytes(*dir + "/ckpt/a/b/data"), "hello ");
    ASSERT_TRUE((*file)->WriteAt(6, AsBytes("there")).ok());
  }
  EXPECT_EQ(ReadFileBytes(*dir + "/ckpt/a/b/data"), "hello there");
  auto kept = positional->OpenPositional("a/b/data", 100);  // shorter than kept: untouched
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(ReadFileBytes(*dir + "/ckpt/a/b/data"), "hello there");
  ASSERT_EQ(::symlink((*dir + "/ckpt/a/b/data").c_str(), (*dir + "/ckpt/a/link").c_str()), 0);
  auto link = positional->OpenPositional("a/link", 0);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("a/link"), std::string::npos) << link.status().ToString();
  EXPECT_EQ(ReadFileBytes(*dir + "/ckpt/a/b/data"), "hello there");
}

TEST(FileKvStoreTest, ListHidesTemporaryFilesAndReadsExistingFiles) {
  auto dir = TempDir();
  ASSERT_TRUE(dir);
  FileKvStore store(*dir);
  ASSERT_TRUE(store.Put("a/x", AsBytes("1")).ok());
  // A crash between steps 1 and 4 leaves a temporary file.
  std::ofstream(*dir + "/a/.__cairn_tmp_999_1") << "partial";
  std::ofstream(*dir + "/a/written_by_someone_else") << "abc";
  auto list = store.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"a/written_by_someone_else", 3}, {"a/x", 1}}));
  auto r = store.Get("a/written_by_someone_else");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->ToString(), "abc");
}

TEST(FileKvStoreTest, FileSpecificKeyRules) {
  auto store = MakeStore();
  ASSERT_TRUE(store);
  for (const char* key : {"a//b", "a/", "dir/", "x/.__cairn_tmp_1_2"}) {
    Status s = store->Put(key, AsBytes("v"));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << key;
    EXPECT_NE(s.message().find(store->url()), std::string_view::npos) << s.ToString();
    EXPECT_NE(s.message().find(key), std::string_view::npos) << s.ToString();
    EXPECT_EQ(store->Get(key).status().code(), StatusCode::kInvalidArgument) << key;
  }
}

TEST(FileKvStoreTest, AKeyWithANulIsShownWholeWithTheNulEscaped) {
  auto store = MakeStore();
  ASSERT_TRUE(store);
  using namespace std::string_literals;
  const std::string key = "dir/a\0b/tail\x01"s + "end";
  for (const Status& s : {store->Put(key, AsBytes("v")), store->Get(key).status(), ValidateKey(key),
                          ValidatePrefix(key + "/", "checkpoint prefix", false)}) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    // Nothing after the NUL is lost, and the message holds no NUL itself.
    EXPECT_NE(s.message().find("dir/a\\x00b/tail\\x01end"), std::string_view::npos) << s.ToString();
    EXPECT_EQ(s.message().find('\0'), std::string_view::npos) << s.ToString();
    EXPECT_NE(s.message().find("NUL byte"), std::string_view::npos) << s.ToString();
  }
  EXPECT_EQ(store->Describe(key), "key `dir/a\\x00b/tail\\x01end` of " + store->url());
}

TEST(FileKvStoreTest, KeyUnderAFileIsAnErrorNamingTheKey) {
  auto store = MakeStore();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Put("f", AsBytes("file")).ok());
  Status s = store->Put("f/g", AsBytes("v"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(store->Describe("f/g")), std::string_view::npos) << s.ToString();
  auto r = store->Get("f/g");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(FileKvStoreTest, MissingRootListsEmpty) {
  auto dir = TempDir();
  ASSERT_TRUE(dir);
  FileKvStore store(*dir + "/does/not/exist");
  auto list = store.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  auto r = store.Get("k");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  ASSERT_TRUE(store.Put("k", AsBytes("v")).ok());  // creates the root
  EXPECT_EQ(ReadFileBytes(*dir + "/does/not/exist/k"), "v");
}

TEST(FileKvStoreTest, RangeIsCheckedAgainstTheCurrentFileSize) {
  auto dir = TempDir();
  ASSERT_TRUE(dir);
  FileKvStore store(*dir);
  ASSERT_TRUE(store.Put("k", AsBytes("0123456789")).ok());
  ASSERT_EQ(::truncate((*dir + "/k").c_str(), 4), 0);
  // The size is checked before reading: the range no longer fits.
  auto r = store.Get("k", ByteRange::Range(2, 6));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  auto tail = store.Get("k", ByteRange::Suffix(3));
  ASSERT_TRUE(tail.ok() && tail->has_value());
  EXPECT_EQ((*tail)->ToString(), "123");
}

// Large aligned values go through O_DIRECT on disk file systems and through
// the buffered fallback where O_DIRECT is refused; both must give the bytes.
void CheckLargeWrites(const char* base) {
  FileKvStoreOptions options;
  options.direct_io_min_bytes = 1 << 20;
  options.write_chunk_bytes = 3 << 20;  // several pwrite calls, not a multiple of the size
  auto store = MakeStore(options, base);
  ASSERT_TRUE(store) << base;
  for (size_t size : {size_t{1} << 20, (size_t{9} << 20) + 1, (size_t{9} << 20) + 4095,
                      (size_t{9} << 20) + 4096}) {
    Buffer value = TestBytes(size, static_cast<uint32_t>(size));
    ASSERT_TRUE(store->Put("v", value).ok()) << size;
    auto r = store->Get("v");
    ASSERT_TRUE(r.ok() && r->has_value()) << size;
    EXPECT_EQ((*r)->size(), size);
    EXPECT_TRUE(**r == value) << size;
    // The same bytes from memory that is not 4096-aligned (as numpy's is)
    // are staged through an aligned buffer; the result must not differ.
    Buffer shifted(size + 16);
    std::memcpy(shifted.data() + 16, value.data(), size);
    ASSERT_TRUE(store->Put("u", ByteView(shifted.data() + 16, size)).ok()) << size;
    auto u = store->Get("u");
    ASSERT_TRUE(u.ok() && u->has_value()) << size;
    EXPECT_TRUE(**u == value) << size;
  }
}

TEST(FileKvStoreTest, LargeWritesOnDisk) { CheckLargeWrites("/tmp"); }

TEST(FileKvStoreTest, LargeWritesOnTmpfs) {
  struct stat st;
  ASSERT_EQ(::stat("/dev/shm", &st), 0) << "this machine has /dev/shm";
  CheckLargeWrites("/dev/shm");
}

}  // namespace
}  // namespace cairn
