// Temporary step directories carry their owner, and the sweep of a root
// (step 6 of step.h) removes those of gone owners, of any step, and nothing
// else; a resume (step 7) takes over a dead owner's directory, never a live
// one's, and is then safe from sweeps.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::orbax {
namespace {
namespace fs = std::filesystem;

struct TempDir : cairn::testing::TempDir {
  TempDir() : cairn::testing::TempDir("cairn_tmp_sweep") {}
};

// A record of this host whose pid has exited.
OwnerRecord ExitedOwner(const std::string& id) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  OwnerRecord r = NewOwnerRecord(id);
  r.process.pid = child;
  r.process.start_ticks = ProcessStartTicks(child).value_or(1);
  ::waitpid(child, nullptr, 0);
  return r;
}

class Root {
 public:
  Root() : store_(std::make_shared<FileKvStore>(dir_.path)), root_{store_, "run/", dir_.path, false} {}
  const Location& location() const { return root_; }
  // `<name>/data`, and the owner record `record` (a raw string) when given.
  void Leave(const std::string& name, const std::optional<std::string>& record) {
    ASSERT_TRUE(store_->Put("run/" + name + "/data", AsBytes(std::string("x"))).ok());
    if (record) {
      ASSERT_TRUE(store_->Put("run/" + name + "/" + std::string(kOwnerRecordFile), AsBytes(*record)).ok());
    }
  }
  bool Has(const std::string& name) const { return fs::exists(dir_.path + "/run/" + name); }
  std::string Path(const std::string& name) const { return dir_.path + "/run/" + name; }

 private:
  TempDir dir_;
  std::shared_ptr<FileKvStore> store_;
  Location root_;
};

TEST(AbandonedTemporaries, OfAnyStepGoWhenTheirOwnerIsGoneAndNothingElseDoes) {
  Root root;
  const int64_t minute = int64_t{60} * 1000 * 1000 * 1000;
  root.Leave("2", std::nullopt);  // a step
  root.Leave("3.orbax-checkpoint-tmp-exited", EmitOwnerRecord(ExitedOwner("exited")));
  OwnerRecord reused = NewOwnerRecord("reused");  // this pid, another start time
  reused.process.start_ticks += 1;
  root.Leave("4.orbax-checkpoint-tmp-reused", EmitOwnerRecord(reused));
  root.Leave("5.orbax-checkpoint-tmp-abandoned", EmitOwnerRecord(NewOwnerRecord("abandoned")));  // this process
  OwnerRecord expired = NewOwnerRecord("expired");  // another host, lease over
  expired.process.host = "elsewhere";
  expired.lease_expires_unix_ns = NowNanos() - minute;
  root.Leave("6.orbax-checkpoint-tmp-expired", EmitOwnerRecord(expired));
  OwnerRecord remote = expired;  // another host, lease running: may be alive
  remote.save_id = "remote";
  remote.lease_expires_unix_ns = NowNanos() + minute;
  root.Leave("7.orbax-checkpoint-tmp-remote", EmitOwnerRecord(remote));
  root.Leave("8.orbax-checkpoint-tmp", std::nullopt);  // Orbax's own: no record
  root.Leave("9.cairn-deleting-0123.orbax-checkpoint-tmp", std::nullopt);  // step_retention.h's
  root.Leave("11.orbax-checkpoint-tmp-garbled", std::string("not a record"));
  root.Leave("12.orbax-checkpoint-tmp-kept", EmitOwnerRecord(ExitedOwner("kept")));
  auto live = BeginCommit(root.location().Child("10"), "live");  // a save in progress here
  ASSERT_TRUE(live.ok()) << live.status().ToString();

  Status swept = RemoveAbandonedTemporaries(root.location(), "12.orbax-checkpoint-tmp-kept");
  ASSERT_TRUE(swept.ok()) << swept.ToString();
  for (const char* gone : {"3.orbax-checkpoint-tmp-exited", "4.orbax-checkpoint-tmp-reused",
                           "5.orbax-checkpoint-tmp-abandoned", "6.orbax-checkpoint-tmp-expired"}) {
    EXPECT_FALSE(root.Has(gone)) << gone << " was left, its owner gone";
  }
  for (const char* kept : {"2/data",
                           "7.orbax-checkpoint-tmp-remote/data", "8.orbax-checkpoint-tmp/data",
                           "9.cairn-deleting-0123.orbax-checkpoint-tmp/data", "11.orbax-checkpoint-tmp-garbled/data",
                           "12.orbax-checkpoint-tmp-kept/data"}) {
    EXPECT_TRUE(root.Has(kept)) << kept << " was removed";
  }
  EXPECT_TRUE(root.Has("10.orbax-checkpoint-tmp-live/" + std::string(kOwnerRecordFile))) << "a live save's was removed";
  // The live save still publishes.
  Status done = FinishCommit(*live);
  ASSERT_TRUE(done.ok()) << done.ToString();
  EXPECT_TRUE(root.Has("10/commit_success.txt"));
}

TEST(AbandonedTemporaries, AResumeTakesOverAGoneOwnersDirectoryNeverALiveOnes) {
  Root root;
  const Location step = root.location().Child("5");
  auto live = BeginCommit(step, "conv");
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  const PendingCommit pending = PendingCommitFor(step, "conv");
  // Its owner (this process, renewing) lives: no takeover.
  Status refused = ResumeCommit(pending);
  EXPECT_EQ(refused.code(), StatusCode::kAlreadyExists) << refused.ToString();
  EXPECT_NE(refused.message().find("being written by another live save"), std::string_view::npos) << refused.ToString();
  EXPECT_NE(refused.message().find(root.Path("5.orbax-checkpoint-tmp-conv")), std::string_view::npos)
      << refused.ToString();
  // The writer stops without committing (a failed conversion): its
  // directory stays, and a sweep would now take it for abandoned.
  (void)StopRenewing(pending.location.Path());
  ASSERT_TRUE(root.Has("5.orbax-checkpoint-tmp-conv/" + std::string(kOwnerRecordFile)));
  // The same conversion run again takes it over and renews it: a sweep
  // leaves it, and it publishes.
  Status resumed = ResumeCommit(pending);
  ASSERT_TRUE(resumed.ok()) << resumed.ToString();
  EXPECT_TRUE(IsLiveHere("conv"));
  ASSERT_TRUE(RemoveAbandonedTemporaries(root.location()).ok());
  EXPECT_TRUE(root.Has("5.orbax-checkpoint-tmp-conv")) << "a resumed save's directory was removed";
  Status done = FinishCommit(pending);
  ASSERT_TRUE(done.ok()) << done.ToString();
  EXPECT_TRUE(root.Has("5/commit_success.txt"));
  EXPECT_FALSE(root.Has("5/" + std::string(kOwnerRecordFile)));
  // A dead process's directory is taken over too.
  root.Leave("6.orbax-checkpoint-tmp-dead", EmitOwnerRecord(ExitedOwner("dead")));
  const PendingCommit dead = PendingCommitFor(root.location().Child("6"), "dead");
  ASSERT_TRUE(ResumeCommit(dead).ok());
  AbandonCommit(dead);
  EXPECT_FALSE(root.Has("6.orbax-checkpoint-tmp-dead"));
}

}  // namespace
}  // namespace cairn::orbax
