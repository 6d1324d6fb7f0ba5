#include "cairn/kvstore/memory/memory_kvstore.h"

#include <gtest/gtest.h>

#include "cairn/kvstore/testing/conformance.h"

namespace cairn {
namespace {

const bool kRegistered = RegisterKvStoreConformanceTests(
    "MemoryConformance", [] { return std::make_shared<MemoryKvStore>("memory://test/"); });

TEST(MemoryKvStoreTest, DefaultIsOneInstance) {
  auto a = MemoryKvStore::Default();
  auto b = MemoryKvStore::Default();
  EXPECT_EQ(a.get(), b.get());
  ASSERT_TRUE(a->Put("memory_test/default_key", AsBytes("v")).ok());
  auto r = b->Get("memory_test/default_key");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->ToString(), "v");
  ASSERT_TRUE(a->DeletePrefix("memory_test/").ok());
  EXPECT_EQ(a->url(), "memory://");
}

TEST(MemoryKvStoreTest, CountsKeysAndBytes) {
  MemoryKvStore store;
  EXPECT_EQ(store.num_keys(), 0u);
  ASSERT_TRUE(store.Put("a", AsBytes("123")).ok());
  ASSERT_TRUE(store.Put("b", AsBytes("45")).ok());
  EXPECT_EQ(store.num_keys(), 2u);
  EXPECT_EQ(store.total_bytes(), 5u);
  ASSERT_TRUE(store.Delete("a").ok());
  EXPECT_EQ(store.total_bytes(), 2u);
}

TEST(MemoryKvStoreTest, ValueIsCopiedOnPut) {
  MemoryKvStore store;
  std::string value = "original";
  ASSERT_TRUE(store.Put("k", AsBytes(value)).ok());
  value[0] = 'X';
  auto r = store.Get("k");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->ToString(), "original");
}

TEST(MemoryKvStoreTest, ErrorsNameTheStore) {
  MemoryKvStore store("memory://named/");
  Status s = store.Put("../x", AsBytes("v"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("memory://named/"), std::string_view::npos) << s.ToString();
  ASSERT_TRUE(store.Put("k", AsBytes("v")).ok());
  auto r = store.Get("k", ByteRange::Range(0, 2));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key `k` of memory://named/"), std::string_view::npos)
      << r.status().ToString();
}

// The default KvWriter (what object stores use: an OCDBT data file is
// buffered whole, then uploaded) grows a large value in large steps: 32
// appends of 2 MiB take one 64 MiB block, where doubling from the first
// append's size took blocks of 2, 4, ..., 64 MiB (126 MiB, copying what it
// held at each step).
TEST(MemoryKvStoreTest, WriterGrowsALargeValueWithoutDoublingFromItsFirstAppend) {
  MemoryKvStore store;
  auto w = store.OpenWriter("big");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::string chunk(size_t{2} << 20, '\0');
  const uint64_t before = Buffer::TotalBytesAllocated();
  for (int i = 0; i < 32; ++i) {
    chunk[0] = static_cast<char>(i);
    ASSERT_TRUE((*w)->Append(AsBytes(chunk)).ok());
  }
  const uint64_t allocated = Buffer::TotalBytesAllocated() - before;
  ASSERT_TRUE((*w)->Commit().ok());
  // Control: the value is every append, in order.
  auto r = store.Get("big");
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  ASSERT_EQ((*r)->size(), size_t{64} << 20);
  for (int i = 0; i < 32; ++i) EXPECT_EQ((*r)->data()[size_t(i) * (2 << 20)], i) << i;
  EXPECT_GE(allocated, uint64_t{64} << 20);
  EXPECT_LT(allocated, uint64_t{96} << 20) << "the writer's buffer doubled from its first append";
}

}  // namespace
}  // namespace cairn
