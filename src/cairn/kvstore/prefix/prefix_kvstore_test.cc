#include "cairn/kvstore/prefix/prefix_kvstore.h"

#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/conformance.h"

namespace cairn {
namespace {

const bool kRegistered = RegisterKvStoreConformanceTests("PrefixOverMemoryConformance", [] {
  auto base = std::make_shared<MemoryKvStore>();
  // Neighbours of the prefix that the view must never show or touch.
  EXPECT_TRUE(base->Put("root/su", AsBytes("outside")).ok());
  EXPECT_TRUE(base->Put("root/subx", AsBytes("outside")).ok());
  EXPECT_TRUE(base->Put("other", AsBytes("outside")).ok());
  return std::make_shared<PrefixKvStore>(base, "root/sub/");
});

TEST(PrefixKvStoreTest, MapsKeysUnderThePrefix) {
  auto base = std::make_shared<MemoryKvStore>();
  PrefixKvStore view(base, "p/q/");
  EXPECT_EQ(view.url(), "memory://p/q/");
  ASSERT_TRUE(view.Put("a/b", AsBytes("1")).ok());
  auto r = base->Get("p/q/a/b");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->ToString(), "1");
  ASSERT_TRUE(base->Put("p/q/c", AsBytes("22")).ok());
  ASSERT_TRUE(base->Put("p/qq", AsBytes("333")).ok());
  auto list = view.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"a/b", 1}, {"c", 2}}));
  std::vector<KvMutation> batch;
  batch.push_back({"c", std::nullopt});
  batch.push_back({"d", Buffer::CopyOf("4444")});
  ASSERT_TRUE(view.ApplyBatch(std::move(batch)).ok());
  auto all = base->List("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<KeyInfo>{{"p/q/a/b", 1}, {"p/q/d", 4}, {"p/qq", 3}}));
  ASSERT_TRUE(view.DeletePrefix("").ok());
  all = base->List("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<KeyInfo>{{"p/qq", 3}}));
}

TEST(PrefixKvStoreTest, KeysCannotEscapeThePrefix) {
  auto base = std::make_shared<MemoryKvStore>();
  PrefixKvStore view(base, "p/q/", "memory://p/q/");
  // "../x" would be the valid base key "p/q/../x" only by accident of
  // concatenation; the view rejects it first.
  EXPECT_EQ(view.Put("../x", AsBytes("v")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(base->num_keys(), 0u);
}

TEST(PrefixKvStoreTest, EmptyPrefixReturnsTheBase) {
  auto base = std::make_shared<MemoryKvStore>();
  EXPECT_EQ(MakePrefixKvStore(base, "").get(), base.get());
  auto view = MakePrefixKvStore(base, "x/");
  EXPECT_NE(view.get(), base.get());
  EXPECT_EQ(view->url(), "memory://x/");
}

}  // namespace
}  // namespace cairn
