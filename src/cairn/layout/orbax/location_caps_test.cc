// A location commits in place when its store says so
// (StoreCapabilities::commits_in_place), whatever its URL looks like.
#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/layout/orbax/location.h"

namespace cairn::orbax {
namespace {

// A store with the default prefix commit (in place), named like a local one.
class InPlaceMemory final : public MemoryKvStore {
 public:
  InPlaceMemory() : MemoryKvStore("memory://in-place/") {}
  StoreCapabilities Capabilities() const override { return {}; }
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix, std::string_view pending_prefix) override {
    return KvStore::BeginPrefixCommit(final_prefix, pending_prefix);
  }
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name, ByteView marker) override {
    return KvStore::FinishPrefixCommit(commit, marker_name, marker);
  }
};

TEST(LocationCapabilities, AskedOfTheStoreNotReadOffItsUrl) {
  // Named like an object store, but renames into place.
  Location renaming = LocationInStore(std::make_shared<MemoryKvStore>("s3://bucket/"), "ckpt/");
  EXPECT_FALSE(renaming.commits_in_place);
  EXPECT_FALSE(renaming.Child("7").commits_in_place);
  // Named like a memory store, but commits in place.
  Location in_place = LocationInStore(std::make_shared<InPlaceMemory>(), "ckpt/");
  EXPECT_TRUE(in_place.commits_in_place);
  EXPECT_TRUE(in_place.Child("7").Parent().commits_in_place);
}

TEST(LocationCapabilities, OpenLocationAsksTheOpenedStore) {
  auto memory = OpenLocation("memory://caps/ckpt");
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_FALSE(memory->commits_in_place);
  EXPECT_EQ(memory->prefix, "ckpt/");
}

}  // namespace
}  // namespace cairn::orbax
