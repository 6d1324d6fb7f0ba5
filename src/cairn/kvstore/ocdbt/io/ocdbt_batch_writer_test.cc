// The OCDBT batch writer: values added from many threads become visible in
// one new generation at Commit, none before.
#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"

#include <gtest/gtest.h>

#include <thread>

#include "cairn/kvstore/memory/memory_kvstore.h"

namespace cairn::ocdbt {
namespace {

std::string Value(int i) { return std::string(i % 2 == 0 ? 10 : 5000, static_cast<char>('a' + i % 26)) + std::to_string(i); }

TEST(OcdbtBatchWriter, ConcurrentAddsCommitAsOneGeneration) {
  auto base = std::make_shared<MemoryKvStore>();
  auto store = std::make_shared<OcdbtKvStore>(base, OcdbtOptions{});
  ASSERT_TRUE(store->Put("old", AsBytes("x")).ok());  // generation 1
  auto writer = NewBatchWriter(store);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 64; i += 4) {
        EXPECT_TRUE(writer->Add("k/" + std::to_string(1000 + i), AsBytes(Value(i))).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto before = store->Get("k/1001");
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->has_value());  // nothing visible before Commit
  ASSERT_TRUE(writer->Commit().ok());
  auto manifest = store->ReadManifest();
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  EXPECT_EQ((*manifest)->latest_generation(), 2u);
  for (int i = 0; i < 64; ++i) {
    auto v = store->Get("k/" + std::to_string(1000 + i));
    ASSERT_TRUE(v.ok() && v->has_value()) << i;
    EXPECT_EQ((*v)->ToString(), Value(i));
  }
  auto old = store->Get("old");
  ASSERT_TRUE(old.ok() && old->has_value());
  auto bad = writer->Add("/abs", AsBytes("x"));
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

TEST(OcdbtBatchWriter, DefaultWriterPutsEachValue) {
  auto base = std::make_shared<MemoryKvStore>();
  auto writer = NewBatchWriter(base);
  ASSERT_TRUE(writer->Add("a", AsBytes("1")).ok());
  auto v = base->Get("a");
  ASSERT_TRUE(v.ok() && v->has_value());  // visible at once on a plain store
  EXPECT_TRUE(writer->Commit().ok());
}

}  // namespace
}  // namespace cairn::ocdbt
