// Concurrent saves of one step (issue 25): a live save's temporary
// directory survives another save's BeginCommit; leftovers go only when
// their owner is gone; of two overlapping saves exactly one publishes a
// whole step and the other fails saying so, leaving nothing behind — on the
// file store (rename) and on S3 (moto; in place, claim + conditional
// marker). On the old code the live directory was removed by the second
// BeginCommit (the winner then failed, or published a step without data).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <filesystem>
#include <numeric>
#include <set>
#include <thread>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/s3/s3_kvstore.h"
#include "cairn/kvstore/testing/emulator_server.h"
#include "cairn/kvstore/testing/emulator_store.h"
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
  TempDir() : cairn::testing::TempDir("cairn_concurrent") {}
};

std::vector<LeafToWrite> Leaves(const std::vector<float>& w) {
  std::vector<LeafToWrite> leaves(1);
  leaves[0].path = {{"w", KeyType::kDict}};
  leaves[0].value_type = "np.ndarray";
  leaves[0].shape = {4, 3};
  leaves[0].shards.push_back({Box({0, 0}, {4, 3}), w.data()});
  return leaves;
}

ItemWriteOptions Ocdbt() {
  ItemWriteOptions o;
  o.use_ocdbt = true;
  o.use_zarr3 = true;
  return o;
}

std::vector<float> Values(float first) {
  std::vector<float> w(12);
  std::iota(w.begin(), w.end(), first);
  return w;
}

std::vector<float> RestoreW(const Location& step) {
  auto item = OpenItem(step.Child("default"));
  if (!item.ok()) return {};
  auto array = OpenItemArray(*item, "w");
  if (!array.ok()) return {};
  std::vector<float> w(12, -1.0f);
  if (!(*array)->Read(Box({0, 0}, {4, 3}), w.data()).ok()) return {};
  return w;
}

// One save of `final_step` (an item `default` inside); `began` is reached
// after BeginCommit, `written` (when given) after the item's data is written.
Status Save(const Location& final_step, const std::vector<float>& w, const std::string& id,
            std::barrier<>& began, std::barrier<std::function<void()>>* written) {
  auto top = BeginCommit(final_step, id);
  began.arrive_and_wait();
  if (!top.ok()) {
    if (written) written->arrive_and_drop();
    return top.status();
  }
  auto item = BeginCommit(top->location.Child("default"), id);
  Status s = item.status();
  if (s.ok()) s = WriteItemShards(item->location, Leaves(w), Ocdbt());
  if (s.ok()) s = FinalizeItem(item->location, Leaves(w), Ocdbt());
  if (written) written->arrive_and_wait();
  if (s.ok()) s = FinishCommit(*item);
  if (s.ok()) {
    CheckpointMetadata md;
    md.item_handlers = std::map<std::string, std::string>{{"default", "h"}};
    s = WriteSmallFile(top->location, kCheckpointMetadataFile, EmitCheckpointMetadata(md));
  }
  if (s.ok()) s = FinishCommit(*top);
  if (!s.ok() && s.code() != StatusCode::kAlreadyExists) AbandonCommit(*top);
  return s;
}

std::vector<std::string> KeysUnder(const Location& root) {
  auto keys = root.store->List(root.prefix);
  EXPECT_TRUE(keys.ok());
  std::vector<std::string> out;
  if (keys.ok()) {
    for (const KeyInfo& k : *keys) out.push_back(k.key.substr(root.prefix.size()));
  }
  return out;
}

// Two saves of step 7 in each of `rounds` rounds, forced to overlap.
void RaceRounds(const std::function<Location(int)>& root_of, int rounds, bool in_place) {
  int overlapped = 0;
  for (int round = 0; round < rounds; ++round) {
    const Location root = root_of(round);
    const Location step = root.Child("7");
    const std::vector<float> a = Values(100.0f * round), b = Values(100.0f * round + 50);
    std::barrier<> began(2);
    // Both saves have written their whole item before either commits: both
    // temporary directories are live at once (checked here).
    std::function<void()> check = [&] {
      std::set<std::string> with_data;  // temporary directories holding a written item
      for (const std::string& k : KeysUnder(root)) {
        if (k.find("7.orbax-checkpoint-tmp-") == 0 && k.find("/default") != std::string::npos &&
            k.find("manifest.ocdbt") != std::string::npos) {
          with_data.insert(k.substr(0, k.find('/')));
        }
      }
      const int tmps = static_cast<int>(with_data.size());
      EXPECT_EQ(tmps, 2) << "round " << round << ": the writers did not overlap";
      overlapped += tmps == 2;
    };
    std::barrier<std::function<void()>> written(2, check);
    Status sa, sb;
    std::thread ta([&] { sa = Save(step, a, NewSaveId(), began, in_place ? nullptr : &written); });
    std::thread tb([&] { sb = Save(step, b, NewSaveId(), began, in_place ? nullptr : &written); });
    ta.join();
    tb.join();
    ASSERT_NE(sa.ok(), sb.ok()) << "round " << round << ": " << sa.ToString() << " / " << sb.ToString();
    const Status& lost = sa.ok() ? sb : sa;
    EXPECT_EQ(lost.code(), StatusCode::kAlreadyExists) << lost.ToString();
    const std::string says = in_place ? "is being written by another live save"
                                      : "was published by another save while this one";
    EXPECT_NE(lost.message().find(says), std::string_view::npos) << lost.ToString();
    if (in_place) overlapped += lost.message().find(says) != std::string_view::npos;
    // The winner's whole step, nothing else.
    EXPECT_EQ(RestoreW(step), sa.ok() ? a : b) << "round " << round;
    auto listed = ListSteps(root, {}, /*require_commit_file=*/true);
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(listed->size(), 1u);
    for (const std::string& k : KeysUnder(root)) {
      EXPECT_TRUE(k.rfind("7/", 0) == 0) << "round " << round << ": left behind: " << k;
      EXPECT_EQ(k.find(kOwnerRecordFile), std::string::npos) << "round " << round << ": " << k;
    }
  }
  EXPECT_EQ(overlapped, rounds);
}

TEST(ConcurrentSaves, FileStoreExactlyOneWholeStepPerRound) {
  TempDir dir;
  auto store = std::make_shared<FileKvStore>(dir.path);
  RaceRounds([&](int round) { return Location{store, "r" + std::to_string(round) + "/", dir.path, false}; }, 50,
             /*in_place=*/false);
}

TEST(ConcurrentSaves, S3ExactlyOneWholeStepPerRound) {
  s3::S3Options o;
  o.bucket = "cairn-concurrent";
  o.credentials = {"testing", "testing", "", "test"};
  auto store = testing::OpenOnEmulator<s3::S3KvStore>(o, MotoEndpoint());
  ASSERT_NE(store, nullptr);
  RaceRounds([&](int round) { return Location{store, "r" + std::to_string(round) + "/", "s3://x", true}; }, 50,
             /*in_place=*/true);
}

// In place, a marker already there (another save published while this one
// wrote, e.g. after taking over an expired claim) refuses the commit: the
// marker is written with If-None-Match: * on moto.
TEST(ConcurrentSaves, S3MarkerIsWrittenOnlyIfAbsent) {
  s3::S3Options o;
  o.bucket = "cairn-concurrent";
  o.credentials = {"testing", "testing", "", "test"};
  auto store = testing::OpenOnEmulator<s3::S3KvStore>(o, MotoEndpoint());
  ASSERT_NE(store, nullptr);
  Location step{store, "m/7/", "s3://x", true};
  auto pending = BeginCommit(step, NewSaveId());
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  ASSERT_TRUE(store->Put("m/7/" + std::string(kCommitSuccessFile), AsBytes("theirs")).ok());
  Status s = FinishCommit(*pending);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_NE(s.message().find("was published by another save while this one"), std::string_view::npos);
  auto marker = store->Get("m/7/" + std::string(kCommitSuccessFile));
  ASSERT_TRUE(marker.ok() && marker->has_value());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*marker)->data()), (*marker)->size()), "theirs");
  auto record = store->Get("m/7/" + std::string(kOwnerRecordFile));
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->has_value()) << "the loser left its claim";
}

// A live save's temporary directory survives another save's BeginCommit.
TEST(ConcurrentSaves, LiveTemporaryDirectorySurvivesAnotherBegin) {
  TempDir dir;
  auto store = std::make_shared<FileKvStore>(dir.path);
  Location step{store, "7/", dir.path, false};
  auto first = BeginCommit(step, "aaaa");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(store->Put(first->location.Key("data"), AsBytes("first")).ok());
  auto second = BeginCommit(step, "bbbb");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(fs::exists(dir.path + "/7.orbax-checkpoint-tmp-aaaa/data")) << "a live save's directory was removed";
  EXPECT_TRUE(fs::exists(dir.path + "/7.orbax-checkpoint-tmp-aaaa/" + std::string(kOwnerRecordFile)));
  Status one = FinishCommit(*first);
  ASSERT_TRUE(one.ok()) << one.ToString();
  EXPECT_TRUE(fs::exists(dir.path + "/7/data"));
  EXPECT_FALSE(fs::exists(dir.path + "/7/" + std::string(kOwnerRecordFile)));
  Status two = FinishCommit(*second);
  EXPECT_EQ(two.code(), StatusCode::kAlreadyExists) << two.ToString();
  EXPECT_NE(two.message().find("was published by another save while this one"), std::string_view::npos);
  EXPECT_FALSE(fs::exists(dir.path + "/7.orbax-checkpoint-tmp-bbbb")) << "the loser left its directory";
}

// Leftovers whose owner is gone are removed; others stay.
TEST(ConcurrentSaves, OnlyLeftoversOfGoneOwnersAreRemoved) {
  TempDir dir;
  auto store = std::make_shared<FileKvStore>(dir.path);
  auto leave = [&](const std::string& id, std::optional<OwnerRecord> owner) {
    const std::string tmp = "7.orbax-checkpoint-tmp-" + id + "/";
    ASSERT_TRUE(store->Put(tmp + "data", AsBytes("x")).ok());
    if (owner) ASSERT_TRUE(store->Put(tmp + std::string(kOwnerRecordFile), AsBytes(EmitOwnerRecord(*owner))).ok());
  };
  const int64_t now = NowNanos(), minute = int64_t{60} * 1000 * 1000 * 1000;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  OwnerRecord exited = NewOwnerRecord("exited");  // this host, a pid that has exited
  exited.process.pid = child;
  exited.process.start_ticks = ProcessStartTicks(child).value_or(1);
  ::waitpid(child, nullptr, 0);
  leave("exited", exited);
  OwnerRecord reused = NewOwnerRecord("reused");  // this pid, another start time
  reused.process.start_ticks += 1;
  leave("reused", reused);
  OwnerRecord abandoned = NewOwnerRecord("abandoned");  // this process, no such live save
  leave("abandoned", abandoned);
  OwnerRecord expired = NewOwnerRecord("expired");  // another host, lease over
  expired.process.host = "elsewhere";
  expired.lease_expires_unix_ns = now - minute;
  leave("expired", expired);
  OwnerRecord remote = expired;  // another host, lease running: may be alive
  remote.save_id = "remote";
  remote.lease_expires_unix_ns = now + minute;
  leave("remote", remote);
  leave("orbax", std::nullopt);  // no record: Orbax's own or an older cairn's
  auto live = BeginCommit(Location{store, "7/", dir.path, false}, "live");
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  auto again = BeginCommit(Location{store, "7/", dir.path, false}, "newer");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (const char* gone : {"exited", "reused", "abandoned", "expired", "orbax"}) {
    EXPECT_FALSE(fs::exists(dir.path + "/7.orbax-checkpoint-tmp-" + gone)) << gone;
  }
  EXPECT_TRUE(fs::exists(dir.path + "/7.orbax-checkpoint-tmp-remote/data"));
  EXPECT_TRUE(fs::exists(dir.path + "/7.orbax-checkpoint-tmp-live/" + std::string(kOwnerRecordFile)));
  AbandonCommit(*live);
  AbandonCommit(*again);
  EXPECT_FALSE(fs::exists(dir.path + "/7.orbax-checkpoint-tmp-live"));
}

// In place, a claim whose owner is gone is taken over and its keys removed.
TEST(ConcurrentSaves, S3ClaimOfGoneOwnerIsTakenOver) {
  s3::S3Options o;
  o.bucket = "cairn-concurrent";
  o.credentials = {"testing", "testing", "", "test"};
  auto store = testing::OpenOnEmulator<s3::S3KvStore>(o, MotoEndpoint());
  ASSERT_NE(store, nullptr);
  OwnerRecord expired = NewOwnerRecord("old");
  expired.process.host = "elsewhere";
  expired.lease_expires_unix_ns = NowNanos() - 1;
  ASSERT_TRUE(store->Put("t/7/" + std::string(kOwnerRecordFile), AsBytes(EmitOwnerRecord(expired))).ok());
  ASSERT_TRUE(store->Put("t/7/default/partial", AsBytes("x")).ok());
  Location step{store, "t/7/", "s3://x", true};
  auto pending = BeginCommit(step, "new");
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_EQ(KeysUnder(Location{store, "t/", "s3://x", true}),
            (std::vector<std::string>{"7/" + std::string(kOwnerRecordFile)}));
  ASSERT_TRUE(FinishCommit(*pending).ok());
  EXPECT_EQ(KeysUnder(Location{store, "t/", "s3://x", true}),
            (std::vector<std::string>{"7/" + std::string(kCommitSuccessFile)}));
}

// An object store whose first conditional write gets no answer: the request
// was lost (nothing stored) or only its answer was (stored). Stores never
// resend a conditional write; the claim of step 2b' is tried again.
class UnansweredFirstClaimStore : public KvStore {
 public:
  explicit UnansweredFirstClaimStore(bool stored) : stored_(stored) {}
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override {
    return base_->Get(key, range);
  }
  Status Put(std::string_view key, ByteView value) override { return base_->Put(key, value); }
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override {
    if (unanswered_left_ > 0) {
      --unanswered_left_;
      if (stored_) CAIRN_RETURN_IF_ERROR(base_->PutIfAbsent(key, value).status());
      return UnavailableError("conditionally writing " + std::string(key) + ": no answer");
    }
    return base_->PutIfAbsent(key, value);
  }
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected, ByteView value) override {
    return base_->CompareAndPut(key, expected, value);
  }
  Status Delete(std::string_view key) override { return base_->Delete(key); }
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override { return base_->List(prefix); }
  std::string url() const override { return "unanswered://"; }

 private:
  bool stored_;
  int unanswered_left_ = 1;
  std::shared_ptr<MemoryKvStore> base_ = std::make_shared<MemoryKvStore>();
};

TEST(ConcurrentSaves, UnansweredClaimIsWrittenAgainOrFoundLanded) {
  for (bool stored : {false, true}) {
    SCOPED_TRACE(stored ? "the first claim landed" : "the first claim was lost");
    auto store = std::make_shared<UnansweredFirstClaimStore>(stored);
    Location step{store, "t/7/", "unanswered://", true};
    auto pending = BeginCommit(step, "abcd");
    ASSERT_TRUE(pending.ok()) << pending.status().ToString();
    ASSERT_TRUE(store->Put("t/7/default/x", AsBytes("x")).ok());
    ASSERT_TRUE(FinishCommit(*pending).ok());
    EXPECT_EQ(KeysUnder(Location{store, "t/", "unanswered://", true}),
              (std::vector<std::string>{"7/" + std::string(kCommitSuccessFile), "7/default/x"}));
  }
}

}  // namespace
}  // namespace cairn::orbax
