// `cairn info` on an emergency run (tier_info.h): a local directory shows
// its own steps, peer copies and the persistent steps; a persistent root
// shows its steps and the local directories that used it; any other
// directory is not an emergency run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/emergency/tier_info.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;

TEST(EmergencyTierInfo, LocalDirectoryAndPersistentRootDescribeTheRun) {
  const fs::path root = fs::temp_directory_path() / ("cairn_tier_info_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto single = NewSingleProcessCoordinator();
  EmergencyOptions o;
  o.local_directory = (root / "local").string();
  o.persistent_directory = (root / "persistent").string();
  o.peer_copies = 0;
  o.local_max_to_keep = 2;
  o.persistent_save_interval_steps = 2;
  {
    auto m = EmergencyCheckpointManager::Open(o, *single, nullptr);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    for (int64_t step = 1; step <= 3; ++step) {
      const testing::JobState state = testing::StateAt(step);
      ASSERT_TRUE((*m)->Save(step, testing::LeavesOf(state, 0)).ok());
    }
    ASSERT_TRUE((*m)->Close().ok());
  }
  fs::create_directories(root / "local" / "4.orbax-checkpoint-tmp-abc");  // an unfinished save
  auto local = DescribeEmergencyDirectory(*orbax::OpenLocation(o.local_directory));
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  ASSERT_TRUE(local->has_value());
  const Json& l = **local;
  EXPECT_EQ(l["kind"], "local");
  EXPECT_EQ(l["local_steps"], Json::array({2, 3}));
  EXPECT_EQ(l["uncommitted"], Json::array({"4.orbax-checkpoint-tmp-abc"}));
  EXPECT_EQ(l["persistent_steps"], Json::array({2}));
  EXPECT_EQ(l["persistent_directory"], o.persistent_directory);

  auto persistent = DescribeEmergencyDirectory(*orbax::OpenLocation(o.persistent_directory));
  ASSERT_TRUE(persistent.ok()) << persistent.status().ToString();
  ASSERT_TRUE(persistent->has_value());
  const Json& p = **persistent;
  EXPECT_EQ(p["kind"], "persistent");
  EXPECT_EQ(p["persistent_steps"], Json::array({2}));
  EXPECT_EQ(p["local_directories"]["0"]["local_directory"], o.local_directory);
  EXPECT_EQ(p["local_directories"]["0"]["local_steps"], Json::array({2, 3}));

  // Control: a persistent step directory is no emergency run.
  auto plain = DescribeEmergencyDirectory(*orbax::OpenLocation((root / "persistent" / "2").string()));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->has_value());
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn::emergency
