// Arrays whose chunks are as large as metadata allows (2^34 bytes, 16 GiB):
// reading a few elements of a missing chunk must fill them in place instead
// of materialising the chunk (it used to allocate and fill 16 GiB per
// worker), and a write that truly needs the whole chunk fails with
// ResourceExhausted naming the key when the memory is not there, instead of
// throwing std::bad_alloc out of the library.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/util/buffer.h"
#include "cairn/zarr/array.h"

namespace cairn {
namespace {

constexpr const char* kChunkOf16GiB = R"("shape":[8589934592],"data_type":"int32",)"
                                      R"("chunk_grid":{"name":"regular","configuration":)"
                                      R"({"chunk_shape":[4294967296]}},"fill_value":7)";

std::shared_ptr<ZarrArray> Create(std::shared_ptr<KvStore> store, ZarrFormat format,
                                  const std::string& fields) {
  auto json = ParseJson("{" + fields + "}", "test");
  EXPECT_TRUE(json.ok()) << json.status().ToString();
  if (!json.ok()) return nullptr;
  auto a = ZarrArray::Create(std::move(store), "", format, *json);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : nullptr;
}

// Reads 16 elements at `origin` and checks they are all `expected`, with
// less than 1 MiB of Buffers allocated on the way.
void ExpectSmallReadOf(const ZarrArray& a, Index origin, int32_t expected) {
  std::vector<int32_t> got(16, 0);
  const uint64_t before = Buffer::TotalBytesAllocated();
  Status s = a.Read(Box({origin}, {16}), got.data());
  const uint64_t allocated = Buffer::TotalBytesAllocated() - before;
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LT(allocated, uint64_t{1} << 20) << "bytes allocated for a 64-byte read";
  for (int32_t g : got) EXPECT_EQ(g, expected);
}

TEST(HugeChunkTest, SmallReadOfAMissingChunkDoesNotMaterialiseIt) {
  const std::vector<std::pair<std::string, std::string>> chains = {
      {"uncompressed", R"("codecs":[{"name":"bytes"}])"},
      {"zstd", R"("codecs":[{"name":"bytes"},{"name":"zstd"}])"},
      {"transposed+crc32c", R"("codecs":[{"name":"transpose","configuration":{"order":[0]}},)"
                            R"({"name":"bytes"},{"name":"crc32c"}])"},
  };
  for (const auto& [name, codecs] : chains) {
    SCOPED_TRACE(name);
    auto a = Create(std::make_shared<MemoryKvStore>(), ZarrFormat::kV3,
                    std::string(kChunkOf16GiB) + "," + codecs);
    ASSERT_TRUE(a);
    ExpectSmallReadOf(*a, 100, 7);
    ExpectSmallReadOf(*a, (Index{1} << 32) - 8, 7);  // straddles two missing chunks
  }
  // v2, compressed and not.
  for (const char* compressor : {"null", R"({"id":"zstd","level":1})"}) {
    SCOPED_TRACE(compressor);
    auto a = Create(std::make_shared<MemoryKvStore>(), ZarrFormat::kV2,
                    std::string(R"("shape":[8589934592],"chunks":[4294967296],"dtype":"<i4",)") +
                        R"("fill_value":7,"compressor":)" + compressor);
    ASSERT_TRUE(a);
    ExpectSmallReadOf(*a, 100, 7);
  }
}

// Control: the same small read of a chunk that exists decodes it (here a
// 4 KiB chunk, so the allocation is small) and returns the stored values.
TEST(HugeChunkTest, ControlSmallReadOfAStoredChunkReturnsItsValues) {
  auto a = Create(std::make_shared<MemoryKvStore>(), ZarrFormat::kV3,
                  R"("shape":[4096],"data_type":"int32","fill_value":7,)"
                  R"("chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1024]}},)"
                  R"("codecs":[{"name":"bytes"},{"name":"zstd"}])");
  ASSERT_TRUE(a);
  std::vector<int32_t> v(1024, 5);
  ASSERT_TRUE(a->Write(Box({1024}, {1024}), v.data()).ok());
  ExpectSmallReadOf(*a, 1100, 5);
  ExpectSmallReadOf(*a, 100, 7);
}

TEST(HugeChunkTest, SmallReadOfAMissingHugeShardReadsNoMoreThanTheIndex) {
  auto a = Create(std::make_shared<MemoryKvStore>(), ZarrFormat::kV3,
                  std::string(kChunkOf16GiB) +
                      R"(,"codecs":[{"name":"sharding_indexed","configuration":)"
                      R"({"chunk_shape":[1048576],"codecs":[{"name":"zstd"}]}}])");
  ASSERT_TRUE(a);
  ExpectSmallReadOf(*a, 100, 7);
}

// The process's current virtual size in bytes.
uint64_t VirtualBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// In a child with 2 GiB of address space to spare: writing a few elements
// of a missing 16 GiB chunk must read-modify-write the whole chunk, which
// cannot be allocated: ResourceExhausted naming the key. Exits 0 on
// success, 1 with the reason on stderr.
void WriteIntoHugeChunkUnderAddressLimit() {
  alarm(60);
  auto a = Create(std::make_shared<MemoryKvStore>("memory://huge/"), ZarrFormat::kV3,
                  std::string(kChunkOf16GiB) + R"(,"codecs":[{"name":"bytes"},{"name":"zstd"}])");
  if (!a) std::_Exit(2);
  const uint64_t limit = VirtualBytes() + (uint64_t{2} << 30);
  const rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) std::_Exit(3);
  const int32_t v[4] = {1, 2, 3, 4};
  Status s = a->Write(Box({10}, {4}), v);
  if (s.code() != StatusCode::kResourceExhausted ||
      s.ToString().find("`c/0`") == std::string::npos) {
    std::fprintf(stderr, "unexpected: %s\n", s.ToString().c_str());
    std::_Exit(1);
  }
  // Control in the same child: a write within the limit still works.
  auto small = Create(std::make_shared<MemoryKvStore>(), ZarrFormat::kV3,
                      R"("shape":[64],"data_type":"int32","codecs":[{"name":"bytes"},{"name":"zstd"}])");
  if (!small || !small->Write(Box({10}, {4}), v).ok()) std::_Exit(4);
  std::_Exit(0);
}

TEST(HugeChunkTest, WriteNeedingAnUnallocatableChunkIsResourceExhausted) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Under AddressSanitizer a failed allocation aborts unless told to return
  // null; the child is re-executed, so it reads this.
  std::string asan = std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "";
  setenv("ASAN_OPTIONS", (asan + (asan.empty() ? "" : ":") + "allocator_may_return_null=1").c_str(),
         1);
  EXPECT_EXIT(WriteIntoHugeChunkUnderAddressLimit(), ::testing::ExitedWithCode(0), "");
  setenv("ASAN_OPTIONS", asan.c_str(), 1);
}

}  // namespace
}  // namespace cairn
