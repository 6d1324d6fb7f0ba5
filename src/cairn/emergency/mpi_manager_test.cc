// The emergency manager's job (testing/emergency_job.h) with real processes:
// ctest `emergency_mpi` runs cairn_emergency_test under `mpiexec -n 4` with
// --gtest_filter=EmergencyMpi*. Each rank has its own local directory (its
// "host's disk"); peer copies travel over the MPI transport. A host is lost
// by deleting its local directory between one manager's life and the next
// (a restart of the job). In the plain `emergency` run the test is skipped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cairn/emergency/mpi_transport.h"
#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/mpi_coordinator.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;

bool UnderMpirunWith4() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size) size = std::getenv("PMI_SIZE");
  return size != nullptr && std::string(size) == "4";
}

TEST(EmergencyMpi, LostHostRestoresFromPeerThenBothHoldersLostFallsBack) {
  if (!MpiCoordinatorAvailable() || !UnderMpirunWith4()) GTEST_SKIP() << "runs under mpiexec -n 4";
  auto c = NewMpiCoordinator(std::chrono::seconds(60));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Coordinator& world = **c;
  auto t = NewMpiTransport();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const int p = world.process_index();
  ASSERT_EQ(world.process_count(), testing::kProcesses);
  const auto timeout = std::chrono::seconds(60);
  // Rank 0 picks the job's directory.
  std::string mine;
  if (p == 0) {
    mine = (fs::temp_directory_path() / ("cairn_emergency_mpi_" + orbax::NewSaveId())).string();
    fs::create_directories(mine);
  }
  auto root = world.Broadcast("test/root", 0, mine, timeout);
  ASSERT_TRUE(root.ok()) << root.status().ToString();

  testing::SaveSteps(world, *t, testing::OptionsFor(*root, p));
  ASSERT_TRUE(world.Barrier("test/saved", timeout).ok());
  if (p == 1) fs::remove_all(*root + "/local_1");  // host 1 lost
  ASSERT_TRUE(world.Barrier("test/lost_1", timeout).ok());
  testing::RestoreLatest(world, *t, testing::OptionsFor(*root, p), StepChoice::Tier::kLocal, 7, p == 1);
  ASSERT_TRUE(world.Barrier("test/restored_local", timeout).ok());
  if (p == 3) fs::remove_all(*root + "/local_3");  // host 3, the other holder of rows 4..7
  ASSERT_TRUE(world.Barrier("test/lost_3", timeout).ok());
  testing::RestoreLatest(world, *t, testing::OptionsFor(*root, p), StepChoice::Tier::kPersistent, 5, false);
  ASSERT_TRUE(world.Barrier("test/done", timeout).ok());
  if (p == 0) fs::remove_all(*root);
}

}  // namespace
}  // namespace cairn::emergency
