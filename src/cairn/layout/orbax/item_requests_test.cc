// How often opening a checkpoint reads each thing from its store. On an
// object store every listing and every read is a request (tens of ms on a
// real bucket), so resolving a root to its latest item and opening that item
// must look at each directory once and read the OCDBT manifest once, however
// many arrays are opened. Counted on a store that records every call.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>

#include "cairn/kvstore/forwarding_kvstore.h"
#include "cairn/kvstore/listing_memo_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/item_writer.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::orbax {
namespace {

class CountingKvStore final : public ForwardingKvStore {
 public:
  using ForwardingKvStore::ForwardingKvStore;

  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override {
    Count("children " + std::string(prefix));
    return base_->ListChildren(prefix);
  }
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override {
    Count("list " + std::string(prefix));
    return base_->List(prefix);
  }
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range) override {
    Count("get " + std::string(key));
    return base_->Get(key, range);
  }
  Result<std::optional<Buffer>> GetAtMost(std::string_view key, uint64_t max_bytes) override {
    Count("get " + std::string(key));
    return base_->GetAtMost(key, max_bytes);
  }
  Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) override {
    for (const KeyRead& r : reads) Count("get " + r.key);
    return base_->GetMany(reads, fn);
  }

  std::map<std::string, int> TakeCounts() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(counts_, {});
  }

 private:
  void Count(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[what];
  }
  std::mutex mu_;
  std::map<std::string, int> counts_;
};

std::string Repeated(const std::map<std::string, int>& counts, std::string_view kind) {
  std::string out;
  for (const auto& [what, n] : counts) {
    if (what.rfind(kind, 0) == 0 && n > 1) out += what + " x" + std::to_string(n) + "; ";
  }
  return out;
}

// A root holding steps 1 and 2, each an OCDBT item `default` with two
// arrays, on a memory store seen through `counting`.
std::vector<float> WriteRoot(const Location& root) {
  std::vector<float> values(16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  for (const char* step : {"1", "2"}) {
    std::vector<LeafToWrite> leaves(2);
    for (int i = 0; i < 2; ++i) {
      leaves[i].path = {{i == 0 ? "w" : "b", KeyType::kDict}};
      leaves[i].value_type = "np.ndarray";
      leaves[i].shape = {4, 2};
      leaves[i].shards.push_back({Box({0, 0}, {4, 2}), values.data() + 8 * i});
    }
    const Location item = root.Child(step).Child("default");
    ItemWriteOptions options;
    EXPECT_TRUE(WriteItemShards(item, leaves, options).ok());
    EXPECT_TRUE(FinalizeItem(item, leaves, options).ok());
    EXPECT_TRUE(WriteSmallFile(root.Child(step), kCheckpointMetadataFile, "{}").ok());
  }
  return values;
}

TEST(ItemRequests, ResolvingARootListsEachDirectoryOnce) {
  auto counting = std::make_shared<CountingKvStore>(std::make_shared<MemoryKvStore>());
  Location root{counting, "run/", "memory://requests", false};
  WriteRoot(root);
  counting->TakeCounts();

  auto item = ResolveItemLocation(root);
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  EXPECT_EQ(item->prefix, "run/2/default/");
  EXPECT_EQ(item->store, root.store) << "the location handed back must not keep the resolve's memo";
  const auto counts = counting->TakeCounts();
  EXPECT_EQ(Repeated(counts, "children "), "") << "directories listed more than once";
  EXPECT_EQ(counts.count("children run/"), 1u);
  EXPECT_EQ(counts.count("children run/2/"), 1u);
}

TEST(ItemRequests, OpeningAnItemAndItsArraysReadsTheManifestOnce) {
  auto counting = std::make_shared<CountingKvStore>(std::make_shared<MemoryKvStore>());
  Location root{counting, "run/", "memory://requests", false};
  const std::vector<float> values = WriteRoot(root);
  const Location where = root.Child("2").Child("default");
  counting->TakeCounts();

  auto item = OpenItem(where);
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  for (const char* param : {"w", "b"}) {
    auto array = OpenItemArray(*item, param);
    ASSERT_TRUE(array.ok()) << array.status().ToString();
    std::vector<float> back(8);
    ASSERT_TRUE((*array)->Read(Box({0, 0}, {4, 2}), back.data()).ok());
    EXPECT_EQ(back, std::vector<float>(values.begin() + (param[0] == 'w' ? 0 : 8),
                                       values.begin() + (param[0] == 'w' ? 8 : 16)));
  }
  const auto counts = counting->TakeCounts();
  EXPECT_EQ(counts.count("get run/2/default/manifest.ocdbt"), 1u);
  EXPECT_EQ(Repeated(counts, "get run/2/default/manifest.ocdbt"), "") << "the manifest was read again";
  EXPECT_EQ(Repeated(counts, "children "), "") << "directories listed more than once";
}

// A store that says it serves many requests at once (as an object store
// does) and whose listings of step directories each wait, up to 2 s, for a
// second one to be under way: listed one after another they never overlap.
class OverlapKvStore final : public ForwardingKvStore {
 public:
  using ForwardingKvStore::ForwardingKvStore;
  size_t io_concurrency() const override { return 8; }
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override {
    const bool step = prefix.size() > 4 && prefix.rfind("run/", 0) == 0 &&
                      prefix.find('/', 4) == prefix.size() - 1;
    if (step) {
      std::unique_lock<std::mutex> lock(mu_);
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(2), [&] { return in_flight_ >= 2; });
    }
    auto r = base_->ListChildren(prefix);
    if (step) {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
    }
    return r;
  }
  int max_in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
};

TEST(ItemRequests, StepDirectoriesOfAnObjectStoreAreListedTogether) {
  auto memory = std::make_shared<MemoryKvStore>();
  WriteRoot(Location{memory, "run/", "memory://requests", false});
  for (const char* step : {"1", "2"}) {
    ASSERT_TRUE(memory->Put(std::string("run/") + step + "/" + std::string(kCommitSuccessFile), AsBytes("ok")).ok());
  }
  auto overlap = std::make_shared<OverlapKvStore>(memory);
  // In place, as on a bucket: a step counts once its commit_success.txt is there.
  Location root{overlap, "run/", "memory://requests", /*commits_in_place=*/true};
  auto discovered = DiscoverSteps(root);
  ASSERT_TRUE(discovered.ok()) << discovered.status().ToString();
  ASSERT_EQ(discovered->size(), 2u);
  EXPECT_EQ((*discovered)[1].step, 2);
  EXPECT_GE(overlap->max_in_flight(), 2) << "DiscoverSteps listed the steps one after another";
  auto overlap2 = std::make_shared<OverlapKvStore>(memory);
  root.store = overlap2;
  auto listed = ListSteps(root, StepNameFormat{});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_GE(overlap2->max_in_flight(), 2) << "ListSteps listed the steps one after another";
}

// A save on a bucket checks that its step is free with one listing of that
// step: not its parent (which grows with the steps kept), not the step again
// through the store's own BeginPrefixCommit.
TEST(ItemRequests, BeginningAnInPlaceCommitListsOnlyTheStep) {
  auto counting = std::make_shared<CountingKvStore>(std::make_shared<MemoryKvStore>());
  Location root{counting, "run/", "memory://requests", /*commits_in_place=*/true};
  ASSERT_TRUE(counting->Put("run/2/" + std::string(kCommitSuccessFile), AsBytes("ok")).ok());
  ASSERT_TRUE(counting->Put("run/3/default/leftover", AsBytes("unfinished")).ok());
  counting->TakeCounts();

  auto fresh = BeginCommit(root.Child("4"), NewSaveId());
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->location.prefix, "run/4/");
  auto counts = counting->TakeCounts();
  EXPECT_EQ(counts, (std::map<std::string, int>{{"children run/4/", 1}}));

  // An unfinished step: listed once, then removed (DeletePrefix lists what
  // it removes); the parent is still never listed.
  auto unfinished = BeginCommit(root.Child("3"), NewSaveId());
  ASSERT_TRUE(unfinished.ok()) << unfinished.status().ToString();
  counts = counting->TakeCounts();
  EXPECT_EQ(counts["children run/3/"], 1);
  EXPECT_EQ(counts.count("children run/"), 0u);
  auto left = counting->List("run/3/");
  ASSERT_TRUE(left.ok());
  // Only the claim of the new save (its owner record) is left.
  ASSERT_EQ(left->size(), 1u) << "the unfinished save was not removed";
  EXPECT_EQ(left->front().key, "run/3/" + std::string(kOwnerRecordFile));

  auto committed = BeginCommit(root.Child("2"), NewSaveId());
  EXPECT_EQ(committed.status().code(), StatusCode::kAlreadyExists) << committed.status().ToString();
}

// The memo itself: one listing per prefix until something is written.
TEST(ListingMemo, ListsEachPrefixOnceUntilAWrite) {
  auto counting = std::make_shared<CountingKvStore>(std::make_shared<MemoryKvStore>());
  ASSERT_TRUE(counting->Put("a/x", AsBytes("1")).ok());
  ListingMemoKvStore memo(counting);
  for (int i = 0; i < 3; ++i) {
    auto e = memo.ListChildren("a/");
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->size(), 1u);
  }
  EXPECT_EQ(counting->TakeCounts()["children a/"], 1);
  ASSERT_TRUE(memo.Put("a/y", AsBytes("2")).ok());
  auto after = memo.ListChildren("a/");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 2u) << "a write must forget what was listed";
  EXPECT_EQ(memo.listings(), 2u);
}

}  // namespace
}  // namespace cairn::orbax
