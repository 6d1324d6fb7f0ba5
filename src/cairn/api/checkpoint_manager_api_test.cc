// include/cairn/checkpoint_manager.h: the public manager saves, applies
// retention and restores through the front door (moved from
// engine/checkpoint_manager_test.cc with the public implementation).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "cairn/checkpoint_manager.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::engine {
namespace {
namespace fs = std::filesystem;

std::string TempDir(const std::string& name) { return ::cairn::testing::TestDir("cairn_manager_test", name); }

std::vector<float> Values(int64_t step) {
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(step * 100) + static_cast<float>(i) * 0.5f;
  return v;
}

TEST(PublicCheckpointManager, SaveRestoreAndRetention) {
  const std::string dir = TempDir("public");
  auto coordinator = NewSingleProcessCoordinator();
  cairn::CheckpointManagerOptions o;
  o.max_to_keep = 2;
  auto m = cairn::CheckpointManager::Open(dir, o, *coordinator);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (int64_t step : {1, 2, 3}) {
    auto v = Values(step);
    cairn::CheckpointArray a{{"w"}, "float32", {4, 3}, {}, 1, {{{0, 0}, {4, 3}, v.data(), 0}}};
    auto saved = (*m)->Save(step, {a});
    ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  }
  ASSERT_TRUE((*m)->WaitUntilFinished().ok());
  EXPECT_EQ((*m)->AllSteps(), (std::vector<int64_t>{2, 3}));
  std::vector<float> out(12);
  ASSERT_TRUE((*m)->Restore(3, {{{"w"}, "float32", {{{0, 0}, {4, 3}, out.data()}}}}).ok());
  EXPECT_EQ(out, Values(3));
  Status gone = (*m)->Restore(1, {{{"w"}, "float32", {{{0, 0}, {4, 3}, out.data()}}}});
  EXPECT_EQ(gone.code(), StatusCode::kNotFound) << gone.ToString();
}

}  // namespace
}  // namespace cairn::engine
