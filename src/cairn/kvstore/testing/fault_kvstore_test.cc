#include "cairn/kvstore/testing/fault_kvstore.h"

#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/conformance.h"

namespace cairn {
namespace {

// With no fault configured the wrapper is a transparent KvStore.
const bool kRegistered = RegisterKvStoreConformanceTests("FaultPassThroughConformance", [] {
  return std::make_shared<FaultKvStore>(std::make_shared<MemoryKvStore>());
});

TEST(FaultKvStoreTest, FailsOnlyTheNthWrite) {
  auto base = std::make_shared<MemoryKvStore>();
  FaultKvStore store(base);
  store.FailNthWrite(2, UnavailableError("disk went away"));
  EXPECT_TRUE(store.Put("w0", AsBytes("0")).ok());
  EXPECT_TRUE(store.Delete("w1").ok());
  Status third = store.Put("w2", AsBytes("2"));
  EXPECT_EQ(third.code(), StatusCode::kUnavailable);
  EXPECT_NE(third.message().find("disk went away"), std::string_view::npos);
  EXPECT_NE(third.message().find("write #2"), std::string_view::npos) << third.ToString();
  EXPECT_NE(third.message().find("w2"), std::string_view::npos) << third.ToString();
  auto fourth = store.PutIfAbsent("w3", AsBytes("3"));
  ASSERT_TRUE(fourth.ok());
  EXPECT_TRUE(*fourth);
  EXPECT_EQ(store.writes_attempted(), 4u);
  EXPECT_EQ(store.writes_failed(), 1u);
  // The failed write never reached the base store.
  auto list = base->List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"w0", 1}, {"w3", 1}}));
  // Reads always pass through.
  auto r = store.Get("w0");
  ASSERT_TRUE(r.ok() && r->has_value());
}

TEST(FaultKvStoreTest, FailsAllWritesFromN) {
  auto base = std::make_shared<MemoryKvStore>();
  FaultKvStore store(base);
  store.FailWritesFrom(1, ResourceExhaustedError("ENOSPC"));
  EXPECT_TRUE(store.Put("a", AsBytes("1")).ok());
  EXPECT_EQ(store.Put("b", AsBytes("2")).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.PutIfAbsent("c", AsBytes("3")).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(store.Delete("a").code(), StatusCode::kResourceExhausted);
  std::vector<KvMutation> batch;
  batch.push_back({"d", Buffer::CopyOf("4")});
  EXPECT_EQ(store.ApplyBatch(std::move(batch)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.DeletePrefix("").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.writes_failed(), 5u);
  auto list = base->List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"a", 1}}));

  store.Reset();
  EXPECT_EQ(store.writes_attempted(), 0u);
  EXPECT_TRUE(store.Put("b", AsBytes("2")).ok());
  EXPECT_EQ(base->num_keys(), 2u);
}

TEST(FaultKvStoreTest, BatchIsOneWrite) {
  auto base = std::make_shared<MemoryKvStore>();
  FaultKvStore store(base);
  store.FailNthWrite(1, InternalError("boom"));
  std::vector<KvMutation> batch;
  batch.push_back({"x", Buffer::CopyOf("1")});
  batch.push_back({"y", Buffer::CopyOf("2")});
  EXPECT_TRUE(store.ApplyBatch(std::move(batch)).ok());
  EXPECT_EQ(store.writes_attempted(), 1u);
  EXPECT_EQ(base->num_keys(), 2u);
  EXPECT_EQ(store.Put("z", AsBytes("3")).code(), StatusCode::kInternal);
  EXPECT_EQ(store.url(), base->url());
}

}  // namespace
}  // namespace cairn
