// The Orbax commit protocol (step.h) over KvStores: save ids keep a
// straggling writer out of a new save, and a write failing at any step of a
// save leaves the previous checkpoint intact and no partial step visible.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <filesystem>
#include <numeric>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/fault_kvstore.h"
#include "cairn/kvstore/testing/in_place_store.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/item_writer.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::orbax {
namespace {
namespace fs = std::filesystem;

// A fresh temporary directory, removed at the end.
struct TempDir : cairn::testing::TempDir {
  TempDir() : cairn::testing::TempDir("cairn_commit_test") {}
};

// One float array `w` of 4 x 3 values starting at `first`, plus a string.
struct Tree {
  explicit Tree(float first) : w(12) { std::iota(w.begin(), w.end(), first); }
  std::vector<LeafToWrite> Leaves() const {
    std::vector<LeafToWrite> leaves(2);
    leaves[0].path = {{"w", KeyType::kDict}};
    leaves[0].value_type = "np.ndarray";
    leaves[0].shape = {4, 3};
    leaves[0].shards.push_back({Box({0, 0}, {4, 3}), w.data()});
    leaves[1].path = {{"tag", KeyType::kDict}};
    leaves[1].value_type = "string";
    leaves[1].string_value = "tree " + std::to_string(w[0]);
    return leaves;
  }
  std::vector<float> w;
};

ItemWriteOptions Options(bool ocdbt) {
  ItemWriteOptions o;
  o.use_ocdbt = ocdbt;
  o.use_zarr3 = true;
  return o;
}

// The sequence a CheckpointManager save takes (python/cairn/orbax.py):
// step and item begin, shards, finalize, item finish, step metadata, step
// finish. Stops at the first error.
Status SaveSteps(const Location& root, int64_t step, const Tree& tree, bool ocdbt, const std::string& id,
                 std::optional<PendingCommit>& begun);

// A save of `step`; one that fails after beginning abandons its commit, as
// the engine does (step 5 of step.h).
Status SaveStep(const Location& root, int64_t step, const Tree& tree, bool ocdbt, const std::string& id) {
  std::optional<PendingCommit> begun;
  Status s = SaveSteps(root, step, tree, ocdbt, id, begun);
  if (!s.ok() && begun) AbandonCommit(*begun);
  return s;
}

Status SaveSteps(const Location& root, int64_t step, const Tree& tree, bool ocdbt, const std::string& id,
                 std::optional<PendingCommit>& begun) {
  const Location final_step = root.Child(std::to_string(step));
  CAIRN_ASSIGN_OR_RETURN(PendingCommit top, BeginCommit(final_step, id));
  begun = top;
  CAIRN_ASSIGN_OR_RETURN(PendingCommit item, BeginCommit(top.location.Child("default"), id));
  CAIRN_RETURN_IF_ERROR(WriteItemShards(item.location, tree.Leaves(), Options(ocdbt)));
  CAIRN_RETURN_IF_ERROR(FinalizeItem(item.location, tree.Leaves(), Options(ocdbt)));
  CAIRN_RETURN_IF_ERROR(FinishCommit(item));
  CheckpointMetadata md;
  md.item_handlers = std::map<std::string, std::string>{{"default", std::string(kPyTreeHandler)}};
  md.init_timestamp_nsecs = 1;
  md.commit_timestamp_nsecs = 2;
  CAIRN_RETURN_IF_ERROR(WriteSmallFile(top.location, kCheckpointMetadataFile, EmitCheckpointMetadata(md)));
  return FinishCommit(top);
}

// Steps DiscoverSteps and ListSteps find under `root`.
std::vector<int64_t> Steps(const Location& root) {
  std::vector<int64_t> out;
  auto found = DiscoverSteps(root);
  EXPECT_TRUE(found.ok()) << found.status().ToString();
  if (found.ok()) {
    for (const StepInfo& s : *found) out.push_back(s.step);
  }
  auto listed = ListSteps(root, {});
  EXPECT_TRUE(listed.ok()) << listed.status().ToString();
  if (listed.ok()) {
    std::vector<int64_t> l;
    for (const StepInfo& s : *listed) l.push_back(s.step);
    EXPECT_EQ(l, out);
  }
  return out;
}

// Restores step `step` and returns `w`, failing the test on errors.
std::vector<float> RestoreW(const Location& root, int64_t step) {
  auto item_loc = ResolveItemLocation(root.Child(std::to_string(step)));
  EXPECT_TRUE(item_loc.ok()) << item_loc.status().ToString();
  if (!item_loc.ok()) return {};
  auto item = OpenItem(*item_loc);
  EXPECT_TRUE(item.ok()) << item.status().ToString();
  if (!item.ok()) return {};
  auto array = OpenItemArray(*item, "w");
  EXPECT_TRUE(array.ok()) << array.status().ToString();
  if (!array.ok()) return {};
  std::vector<float> w(12, -1.0f);
  Status read = (*array)->Read(Box({0, 0}, {4, 3}), w.data());
  EXPECT_TRUE(read.ok()) << read.ToString();
  return w;
}

// Every key stored under `loc`.
std::vector<std::string> KeysUnder(const Location& loc) {
  std::vector<std::string> out;
  auto keys = loc.store->List(loc.prefix);
  EXPECT_TRUE(keys.ok());
  if (keys.ok()) {
    for (const KeyInfo& k : *keys) out.push_back(k.key.substr(loc.prefix.size()));
  }
  return out;
}

TEST(SmallFiles, ReadsAreBoundedAndRefuseSpecialFiles) {
  TempDir dir;
  Location loc{std::make_shared<FileKvStore>(dir.path), "", dir.path};
  ASSERT_TRUE(WriteSmallFile(loc, "_CHECKPOINT_METADATA", std::string(100, 'x')).ok());
  auto exact = ReadSmallFile(loc, "_CHECKPOINT_METADATA", 100);  // control: at the limit
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->size(), 100u);
  auto over = ReadSmallFile(loc, "_CHECKPOINT_METADATA", 99);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("_CHECKPOINT_METADATA"), std::string_view::npos);
  EXPECT_NE(over.status().message().find("limit of 99 bytes"), std::string_view::npos) << over.status().ToString();
  auto missing = ReadSmallFile(loc, "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  // /dev/zero behind a symlink and a FIFO: refused at once, never read.
  fs::create_symlink("/dev/zero", dir.path + "/_METADATA");
  ASSERT_EQ(::mkfifo((dir.path + "/_sharding").c_str(), 0600), 0);
  for (const char* name : {"_METADATA", "_sharding"}) {
    auto r = ReadSmallFile(loc, name);
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << name << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(name), std::string_view::npos) << r.status().ToString();
  }
  // A large regular file is refused from its size, before it is read.
  {
    std::FILE* f = std::fopen((dir.path + "/big").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(::ftruncate(::fileno(f), int64_t{1} << 40), 0);  // sparse 1 TiB
    std::fclose(f);
  }
  auto big = ReadSmallFile(loc, "big");
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted) << big.status().ToString();
}

TEST(SaveId, TmpNamesFollowOrbaxAndIdsDiffer) {
  EXPECT_EQ(TmpName("7", "ab12"), "7.orbax-checkpoint-tmp-ab12");
  EXPECT_TRUE(IsTmpName(TmpName("7", "ab12")));
  const std::string a = NewSaveId(), b = NewSaveId();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_NE(a, b);
}

// Sets environment variables for one scope, restoring them afterwards.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Object-store URLs open the store at the parent prefix (nothing is sent:
// with a region set, the endpoint is never contacted) and commit in place.
TEST(ObjectStoreLocation, OpensTheParentPrefixAndCommitsInPlace) {
  ScopedEnv env({{"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}, {"AWS_ACCESS_KEY_ID", "k"},
                 {"AWS_SECRET_ACCESS_KEY", "s"}, {"AWS_REGION", "us-east-1"}});
  auto loc = OpenLocation("s3://bkt/runs/a%20b/ckpt/");
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->store->url(), "s3://bkt/runs/a b/");
  EXPECT_EQ(loc->prefix, "ckpt/");
  EXPECT_TRUE(loc->commits_in_place);
  EXPECT_EQ(loc->Path(), "s3://bkt/runs/a b/ckpt");
  EXPECT_TRUE(loc->Child("7").commits_in_place);
  EXPECT_TRUE(loc->Parent().commits_in_place);
  const PendingCommit p = PendingCommitFor(loc->Child("7"), "abc");
  EXPECT_EQ(p.location.prefix, "ckpt/7/");
  EXPECT_TRUE(p.commit.in_place);
  auto bucket = OpenLocation("s3://bkt");
  ASSERT_TRUE(bucket.ok()) << bucket.status().ToString();
  EXPECT_EQ(bucket->prefix, "");
  EXPECT_EQ(bucket->Path(), "s3://bkt/");
  // Must fail: a pipeline, an escaped '/', a bad bucket name; control: a
  // local path does not commit in place.
  auto pipeline = OpenLocation("s3://bkt/ckpt/|ocdbt:");
  EXPECT_EQ(pipeline.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pipeline.status().message().find("not a pipeline"), std::string_view::npos);
  auto escaped = OpenLocation("s3://bkt/a%2Fb");
  EXPECT_EQ(escaped.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(escaped.status().message().find("a%2Fb"), std::string_view::npos) << escaped.status().ToString();
  auto bad_bucket = OpenLocation("s3://B_ad/x");
  EXPECT_EQ(bad_bucket.status().code(), StatusCode::kInvalidArgument) << bad_bucket.status().ToString();
  TempDir dir;
  auto local = OpenLocation(dir.path + "/ckpt");
  ASSERT_TRUE(local.ok());
  EXPECT_FALSE(local->commits_in_place);
  EXPECT_FALSE(PendingCommitFor(*local, "abc").commit.in_place);
}

// Issue 8, item 7: save A begins and one of its writers stalls; save B of
// the same step begins (removing A's leftovers), and A's writer then writes
// its shards. B's committed checkpoint holds only B's data, and A can no
// longer commit over it.
class Straggler : public ::testing::TestWithParam<bool> {};

TEST_P(Straggler, WritesAfterANewBeginNeverReachTheCommittedCheckpoint) {
  const bool ocdbt = GetParam();
  TempDir dir;
  Location root{std::make_shared<FileKvStore>(dir.path), "", dir.path};
  const Location final_item = root.Child("ckpt");
  Tree a(100.0f), b(0.0f);

  auto save_a = BeginCommit(final_item, "aaaa");
  ASSERT_TRUE(save_a.ok()) << save_a.status().ToString();
  auto save_b = BeginCommit(final_item, "bbbb");
  ASSERT_TRUE(save_b.ok()) << save_b.status().ToString();
  EXPECT_NE(save_a->location.prefix, save_b->location.prefix);

  ASSERT_TRUE(WriteItemShards(save_b->location, b.Leaves(), Options(ocdbt)).ok());
  // The straggler of save A writes now, after B's BeginCommit.
  ASSERT_TRUE(WriteItemShards(save_a->location, a.Leaves(), Options(ocdbt)).ok());
  ASSERT_TRUE(FinalizeItem(save_b->location, b.Leaves(), Options(ocdbt)).ok());
  ASSERT_TRUE(FinishCommit(*save_b).ok());

  auto item = OpenItem(final_item);
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  auto array = OpenItemArray(*item, "w");
  ASSERT_TRUE(array.ok());
  std::vector<float> w(12);
  ASSERT_TRUE((*array)->Read(Box({0, 0}, {4, 3}), w.data()).ok());
  EXPECT_EQ(w, b.w);
  EXPECT_EQ(item->strings.at("tag"), "tree 0.000000");
  // Nothing of A is in the committed directory: its process-0 database /
  // chunk files are B's (same names), so compare the whole key set with a
  // clean save of B alone.
  TempDir clean_dir;
  Location clean{std::make_shared<FileKvStore>(clean_dir.path), "", clean_dir.path};
  auto clean_save = BeginCommit(clean.Child("ckpt"), "cccc");
  ASSERT_TRUE(clean_save.ok());
  ASSERT_TRUE(WriteItemShards(clean_save->location, b.Leaves(), Options(ocdbt)).ok());
  ASSERT_TRUE(FinalizeItem(clean_save->location, b.Leaves(), Options(ocdbt)).ok());
  ASSERT_TRUE(FinishCommit(*clean_save).ok());
  auto got = KeysUnder(final_item);
  auto want = KeysUnder(clean.Child("ckpt"));
  if (ocdbt) {
    // OCDBT data files have random names: compare the count and non-data keys.
    EXPECT_EQ(got.size(), want.size());
  } else {
    EXPECT_EQ(got, want);
  }
  // A cannot commit any more: its directory is not B's and `ckpt` exists.
  Status late = FinishCommit(*save_a);
  EXPECT_TRUE(late.code() == StatusCode::kAlreadyExists || late.code() == StatusCode::kNotFound)
      << late.ToString();
  auto again = OpenItem(final_item);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->strings.at("tag"), "tree 0.000000");
  // The next save of another name removes nothing of `ckpt`; a new save of
  // `ckpt` is refused.
  EXPECT_EQ(BeginCommit(final_item, "dddd").status().code(), StatusCode::kAlreadyExists);
}

INSTANTIATE_TEST_SUITE_P(OcdbtAndDirs, Straggler, ::testing::Bool());

// Issue 8, item 11: a write fails at every step of a save (FaultKvStore under
// the layout). The save reports the error; step 1, committed before, still
// restores bit-exactly; step 2 is never listed.
struct FaultCase {
  bool ocdbt;
  bool memory;
  bool crash;  // FailWritesFrom (nothing after N) instead of FailNthWrite
  bool in_place = false;  // a store without rename (commits_in_place)
};

class SaveFaults : public ::testing::TestWithParam<FaultCase> {};

TEST_P(SaveFaults, EveryFailingStepLeavesThePreviousStepAndNoPartialOne) {
  const FaultCase c = GetParam();
  // No lease renewal among the counted writes of a save.
  SetSaveLeaseNanos(int64_t{3600} * 1000 * 1000 * 1000);
  Tree first(0.0f), second(50.0f);
  auto make_base = [&](const std::string& dir) -> std::shared_ptr<KvStore> {
    if (c.in_place) return std::make_shared<cairn::testing::InPlaceStore>();
    if (c.memory) return std::make_shared<MemoryKvStore>();
    return std::make_shared<FileKvStore>(dir);
  };
  // A clean run counts the writes of the second save.
  uint64_t writes = 0;
  {
    TempDir dir;
    auto fault = std::make_shared<FaultKvStore>(make_base(dir.path));
    Location root{fault, "", dir.path, c.in_place};
    ASSERT_TRUE(SaveStep(root, 1, first, c.ocdbt, "one").ok());
    fault->Reset();
    Status s = SaveStep(root, 2, second, c.ocdbt, "two");
    ASSERT_TRUE(s.ok()) << s.ToString();
    writes = fault->writes_attempted();
    if (c.in_place) {
      // Written in place: no temporary name, the markers are the commit.
      const std::vector<std::string> keys = KeysUnder(root);
      EXPECT_NE(std::find(keys.begin(), keys.end(), "2/commit_success.txt"), keys.end());
      EXPECT_NE(std::find(keys.begin(), keys.end(), "2/default/commit_success.txt"), keys.end());
      for (const std::string& k : keys) EXPECT_FALSE(IsTmpName(k)) << k;
      // The marker is what commits: without it step 2 is not listed, and a
      // new save of step 2 replaces the unmarked objects (control: with
      // the marker the save is refused).
      ASSERT_TRUE(fault->Delete("2/commit_success.txt").ok());
      EXPECT_EQ(Steps(root), (std::vector<int64_t>{1}));
      EXPECT_EQ(BeginCommit(root.Child("1"), "again").status().code(), StatusCode::kAlreadyExists);
      Status resave = SaveStep(root, 2, second, c.ocdbt, "again");
      ASSERT_TRUE(resave.ok()) << resave.ToString();
    }
    EXPECT_EQ(Steps(root), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(RestoreW(root, 2), second.w);
  }
  ASSERT_GT(writes, 6u);
  RecordProperty("writes_per_save", static_cast<int>(writes));
  // The last write FaultKvStore counts removes the owner record from the
  // published step; in place, the one before it is the publication after
  // the step's marker, a no-op there: failing either fails a save whose
  // step is already published.
  const uint64_t fallible = c.in_place ? writes - 2 : writes - 1;
  for (uint64_t n = 0; n < fallible; ++n) {
    TempDir dir;
    auto fault = std::make_shared<FaultKvStore>(make_base(dir.path));
    Location root{fault, "", dir.path, c.in_place};
    ASSERT_TRUE(SaveStep(root, 1, first, c.ocdbt, "one").ok());
    fault->Reset();
    // In place, one claim write that gets no answer (Unavailable) is
    // written again (step 2b' of step.h): a single failure there is another
    // error, which no save retries.
    const Status injected = c.crash      ? UnavailableError("injected crash")
                            : c.in_place ? InternalError("injected failure")
                                         : UnavailableError("injected failure");
    if (c.crash) {
      fault->FailWritesFrom(n, injected);
    } else {
      fault->FailNthWrite(n, injected);
    }
    Status s = SaveStep(root, 2, second, c.ocdbt, "two");
    EXPECT_EQ(s.code(), injected.code()) << "write " << n << ": " << s.ToString();
    EXPECT_NE(s.message().find("injected"), std::string_view::npos) << s.ToString();
    fault->Reset();
    EXPECT_EQ(Steps(root), (std::vector<int64_t>{1})) << "write " << n;
    EXPECT_EQ(RestoreW(root, 1), first.w) << "write " << n;
    // (In place, the unmarked step 2 may be complete but for its marker; it
    // is only not listed.)
    if (!c.in_place) EXPECT_FALSE(ResolveItemLocation(root.Child("2")).ok()) << "write " << n;
    // A retry with a new save id succeeds and cleans up the failed attempt.
    Status retry = SaveStep(root, 2, second, c.ocdbt, "three");
    EXPECT_TRUE(retry.ok()) << "write " << n << ": " << retry.ToString();
    EXPECT_EQ(Steps(root), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(RestoreW(root, 2), second.w) << "write " << n;
    auto entries = root.store->ListChildren("");
    ASSERT_TRUE(entries.ok());
    for (const ChildEntry& e : *entries) {
      if (c.memory) EXPECT_FALSE(IsTmpName(e.name)) << "write " << n << ": leftover " << e.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, SaveFaults,
                         ::testing::Values(FaultCase{true, false, false}, FaultCase{false, false, false},
                                           FaultCase{true, false, true}, FaultCase{true, true, false},
                                           FaultCase{false, true, true}, FaultCase{true, true, false, true},
                                           FaultCase{false, true, true, true}));

}  // namespace
}  // namespace cairn::orbax
