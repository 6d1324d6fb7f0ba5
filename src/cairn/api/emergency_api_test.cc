// include/cairn/emergency.h in one process: save through the public types,
// restore the local step, then (local directory lost) the persistent step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>

#include "cairn/emergency.h"

namespace cairn {
namespace {
namespace fs = std::filesystem;

TEST(EmergencyPublicApi, SaveRestoreAndFallBack) {
  const std::string root = (fs::temp_directory_path() /
                            ("cairn_emergency_public_" + std::to_string(::getpid()))).string();
  fs::remove_all(root);
  auto single = NewSingleProcessCoordinator();
  EmergencyCheckpointOptions o;
  o.local_directory = root + "/local";
  o.persistent_directory = root + "/persistent";
  o.persistent_save_interval_steps = 2;
  std::vector<float> w(24);
  auto save = [&](int64_t step) {
    std::iota(w.begin(), w.end(), static_cast<float>(step * 100));
    auto m = OpenEmergencyCheckpointManager(o, *single);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    CheckpointArray a{{"params", "w"}, "float32", {4, 6}, {2, 6}, 1, {}};
    a.shards = {{{0, 0}, {2, 6}, w.data(), 0}, {{2, 0}, {2, 6}, w.data() + 12, 0}};
    auto saved = (*m)->Save(step, {a});
    ASSERT_TRUE(saved.ok()) << saved.status().ToString();
    ASSERT_TRUE((*m)->Close().ok());
  };
  save(2);
  save(3);
  auto restore = [&](const std::string& tier, int64_t step) {
    auto m = OpenEmergencyCheckpointManager(o, *single);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::vector<float> out(24, -1);
    auto report = (*m)->Restore(std::nullopt, {{{"params", "w"}, "float32", {{{0, 0}, {4, 6}, out.data()}}}});
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->tier, tier);
    EXPECT_EQ(report->step, step);
    std::vector<float> want(24);
    std::iota(want.begin(), want.end(), static_cast<float>(step * 100));
    EXPECT_EQ(out, want);
    // The dtype is required (the local tier splits boxes by element size).
    auto no_dtype = (*m)->Restore(std::nullopt, {{{"params", "w"}, "", {{{0, 0}, {4, 6}, out.data()}}}});
    EXPECT_EQ(no_dtype.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(no_dtype.status().message().find("dtype is required"), std::string::npos);
  };
  restore("local", 3);
  fs::remove_all(o.local_directory);
  restore("persistent", 2);
  fs::remove_all(root);
}

TEST(EmergencyPublicApi, TransportOptions) {
  const std::string root = (fs::temp_directory_path() /
                            ("cairn_emergency_transport_" + std::to_string(::getpid()))).string();
  auto single = NewSingleProcessCoordinator();
  EmergencyCheckpointOptions o;
  o.local_directory = root + "/local";
  o.persistent_directory = root + "/persistent";
  o.transport = "carrier-pigeon";
  auto bad = EmergencyCheckpointManager::Open(o, *single);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("carrier-pigeon"), std::string::npos) << bad.status().ToString();
  o.transport = "none";
  o.peer_copies = 1;
  auto copies = EmergencyCheckpointManager::Open(o, *single);
  EXPECT_EQ(copies.status().code(), StatusCode::kInvalidArgument) << copies.status().ToString();
  // Picked from the job: one process needs no transport and makes no copies.
  o.transport = "";
  o.peer_copies = std::nullopt;
  o.num_replicas = 1;
  auto picked = EmergencyCheckpointManager::Open(o, *single);
  ASSERT_TRUE(picked.ok()) << picked.status().ToString();
  EXPECT_TRUE((*picked)->Close().ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn
