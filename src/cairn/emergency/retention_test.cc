// Emergency retention deletes old steps crash-safely (retention.h): a
// deletion cut off at any write leaves every step that a listing shows
// whole, on a store that renames and on one that commits in place; what a
// cut-off deletion leaves is removed by RemoveInterruptedDeletions, which
// the manager runs when it opens.
#include "cairn/emergency/retention.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cairn/emergency/local_step.h"
#include "cairn/emergency/manager.h"
#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/engine/step_retention.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/fault_kvstore.h"
#include "cairn/kvstore/testing/in_place_store.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/process_identity.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;

// The keys of a local step as the manager writes it (7 keys).
const std::vector<std::string> kStepKeys = {"_CHECKPOINT_METADATA", "cairn_local_step.json", "commit_success.txt",
                                            "process_metadata/mesh_metadata.json", "state/_METADATA",
                                            "state/manifest.ocdbt", "state/ocdbt.process_0/d/x"};

void PutStep(KvStore& store, const std::string& root, int64_t step) {
  for (const std::string& k : kStepKeys) {
    ASSERT_TRUE(store.Put(root + std::to_string(step) + "/" + k, AsBytes(std::string("v"))).ok());
  }
}

size_t KeysOf(KvStore& store, const std::string& prefix) {
  auto keys = store.List(prefix);
  EXPECT_TRUE(keys.ok());
  return keys.ok() ? keys->size() : 0;
}

// A fault at every write of retention (keep the newest of steps 1..3):
// every step that ListSteps shows, with or without requiring the commit
// marker (the persistent tier's listing and ListHoldings'), is whole.
TEST(EmergencyRetention, AFaultAtEveryWriteLeavesEveryListedStepWhole) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in-place store" : "renaming store");
    bool finished = false;
    for (uint64_t n = 0; n < 80 && !finished; ++n) {
      auto mem = std::make_shared<MemoryKvStore>("memory://retention/");
      std::shared_ptr<KvStore> base =
          in_place ? std::shared_ptr<KvStore>(std::make_shared<cairn::testing::InPlaceStore>(mem)) : mem;
      auto fault = std::make_shared<FaultKvStore>(base);
      orbax::Location root{fault, "local/", "memory://retention"};
      root.commits_in_place = in_place;
      for (int64_t s = 1; s <= 3; ++s) PutStep(*mem, "local/", s);
      fault->FailWritesFrom(n, UnavailableError("injected crash"));
      Status kept = KeepNewestSteps(root, 1);
      finished = fault->writes_failed() == 0;
      EXPECT_EQ(kept.ok(), finished) << "fault at write " << n << ": " << kept.ToString();
      fault->Reset();
      for (bool require : {false, true}) {
        auto listed = orbax::ListSteps(root, {}, require);
        ASSERT_TRUE(listed.ok()) << listed.status().ToString();
        ASSERT_FALSE(listed->empty());
        EXPECT_EQ(listed->back().step, 3);
        for (const orbax::StepInfo& s : *listed) {
          EXPECT_EQ(KeysOf(*mem, "local/" + std::to_string(s.step) + "/"), kStepKeys.size())
              << "step " << s.step << " is listed (commit marker required: " << require
              << ") but partly deleted after a fault at write " << n;
        }
      }
      // Recovery: the interrupted deletion goes, retention done again
      // leaves step 3 alone.
      ASSERT_TRUE(RemoveInterruptedDeletions(root, nullptr).ok());
      ASSERT_TRUE(KeepNewestSteps(root, 1).ok());
      auto listed = orbax::ListSteps(root, {});
      ASSERT_TRUE(listed.ok());
      ASSERT_EQ(listed->size(), 1u) << "write " << n;
      EXPECT_EQ(listed->front().step, 3);
      if (!in_place) {
        EXPECT_EQ(KeysOf(*mem, "local/"), kStepKeys.size()) << "write " << n;
      }
    }
    EXPECT_TRUE(finished);
  }
}

// The manager, when it opens, removes the trees interrupted deletions left
// in its local tier, its peer copies and (the primary) the persistent tier,
// and nothing else.
// `o` for a job of one process (no peers): Open alone.
EmergencyOptions Alone(EmergencyOptions o) {
  o.num_replicas = 1;
  o.peer_copies = 0;
  return o;
}

TEST(EmergencyRetention, OpeningTheManagerRemovesInterruptedDeletions) {
  const fs::path root = fs::temp_directory_path() / ("cairn_emergency_retention_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const EmergencyOptions o = testing::OptionsFor(root.string(), 0);
  const std::string deleting = engine::DeletingName("4", "0123456789abcdef");
  const std::vector<fs::path> leftovers = {fs::path(o.local_directory) / deleting / "state" / "x",
                                           fs::path(o.local_directory) / "peer_copies" / "process_2" / deleting / "x",
                                           fs::path(o.persistent_directory) / deleting / "default" / "x"};
  const std::vector<fs::path> kept = {fs::path(o.local_directory) / "4.orbax-checkpoint-tmp-resumable" / "x",
                                      fs::path(o.persistent_directory) / "5" / "default" / "x"};
  for (const fs::path& p : leftovers) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
  }
  for (const fs::path& p : kept) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
  }
  auto coordinator = NewSingleProcessCoordinator();
  auto m = EmergencyCheckpointManager::Open(Alone(o), *coordinator, nullptr);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const fs::path& p : leftovers) EXPECT_FALSE(fs::exists(p.parent_path())) << p;
  for (const fs::path& p : kept) EXPECT_TRUE(fs::exists(p)) << p;
  EXPECT_TRUE((*m)->Close().ok());
  fs::remove_all(root);
}

// Found by the crash campaign (emergency path, power loss during a
// persistent save): `persistent/5.orbax-checkpoint-tmp-<id>` of the killed
// job stayed for good, since only a later save of a multiple of 5 would
// have swept it. Open sweeps both tiers' temporaries of gone owners.
TEST(EmergencyRetention, OpeningTheManagerRemovesTemporariesOfGoneOwners) {
  const fs::path root = fs::temp_directory_path() / ("cairn_emergency_tmp_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const EmergencyOptions o = testing::OptionsFor(root.string(), 0);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  orbax::OwnerRecord dead = orbax::NewOwnerRecord("c553d221b49a6927");
  dead.process.pid = child;
  dead.process.start_ticks = ProcessStartTicks(child).value_or(1);
  ::waitpid(child, nullptr, 0);
  // A live owner: another process of this machine, still running.
  const pid_t sleeper = ::fork();
  if (sleeper == 0) {
    ::sleep(60);
    ::_exit(0);
  }
  orbax::OwnerRecord alive = orbax::NewOwnerRecord("00000000000000aa");
  alive.process.pid = sleeper;
  alive.process.start_ticks = ProcessStartTicks(sleeper).value_or(1);
  auto leave = [](const fs::path& dir, const orbax::OwnerRecord& owner) {
    fs::create_directories(dir);
    std::ofstream(dir / std::string(orbax::kOwnerRecordFile)) << orbax::EmitOwnerRecord(owner);
    std::ofstream(dir / "x") << "x";
  };
  const fs::path gone_persistent = fs::path(o.persistent_directory) / "5.orbax-checkpoint-tmp-c553d221b49a6927";
  const fs::path gone_local = fs::path(o.local_directory) / "3.orbax-checkpoint-tmp-c553d221b49a6927";
  const fs::path live = fs::path(o.persistent_directory) / "10.orbax-checkpoint-tmp-00000000000000aa";
  leave(gone_persistent, dead);
  leave(gone_local, dead);
  leave(live, alive);
  auto coordinator = NewSingleProcessCoordinator();
  auto m = EmergencyCheckpointManager::Open(Alone(o), *coordinator, nullptr);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(fs::exists(gone_persistent));
  EXPECT_FALSE(fs::exists(gone_local));
  EXPECT_TRUE(fs::exists(live / "x")) << "a live owner's temporary was removed";
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
  EXPECT_TRUE((*m)->Close().ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn::emergency
