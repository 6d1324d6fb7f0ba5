// The emergency manager with threads standing in for 4 processes in 2
// data-parallel replicas (testing/emergency_job.h): saves with peer copies,
// a lost host restored from its peer (with process ids changed by the
// restart), and the fallback to the persistent tier when both holders of a
// shard are lost. The same job runs under MPI in mpi_manager_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/emergency/zmq_transport.h"
#include "cairn/engine/testing/thread_coordinator.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;
using testing::kProcesses;

std::string TempDir(const std::string& name) {
  std::string dir = (fs::temp_directory_path() /
                     ("cairn_emergency_test_" + std::to_string(::getpid()) + "_" + name)).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs `body(coordinator, transport, p)` on kProcesses threads of a fresh
// job, with in-process transports or (zmq) ZeroMQ ones on localhost.
void RunJob(const std::function<void(Coordinator&, std::shared_ptr<PeerTransport>, int)>& body,
            bool zmq = false) {
  engine::testing::ThreadGroup group(kProcesses);
  InProcessNetwork network(kProcesses);
  std::vector<std::thread> threads;
  for (int p = 0; p < kProcesses; ++p) {
    threads.emplace_back([&, p] {
      std::shared_ptr<PeerTransport> t = network.Endpoint(p);
      if (zmq) {
        auto opened = NewZmqTransport(group.Member(p), "127.0.0.1", std::chrono::seconds(30));
        ASSERT_TRUE(opened.ok()) << opened.status().ToString();
        t = *opened;
      }
      body(group.Member(p), t, p);
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(EmergencyManager, LostHostsRestoreFromPeersThenFromPersistent) {
  const std::string root = TempDir("lose");
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    testing::SaveSteps(c, t, testing::OptionsFor(root, p));
  });
  // Host 1 is lost; the restart also swaps the process ids of hosts 0 and 2
  // (process 0 now runs on the host whose disk was process 2's).
  fs::remove_all(root + "/local_1");
  const int host_of[kProcesses] = {2, 1, 0, 3};
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    testing::RestoreLatest(c, t, testing::OptionsFor(root, host_of[p]), StepChoice::Tier::kLocal, 7,
                           /*lost=*/p == 1);
  });
  // Now host 3 is lost too: 1 and 3 were the only holders of rows 4..7.
  fs::remove_all(root + "/local_3");
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    testing::RestoreLatest(c, t, testing::OptionsFor(root, p), StepChoice::Tier::kPersistent, 5, false);
  });
  fs::remove_all(root);
}

// The same job with peer copies and fetches over ZeroMQ (the transport for
// jobs without MPI), endpoints exchanged through the coordinator.
TEST(EmergencyManager, ZeroMqTransport) {
  if (!ZmqTransportAvailable()) GTEST_SKIP() << "built without ZeroMQ";
  const std::string root = TempDir("zmq");
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    testing::SaveSteps(c, t, testing::OptionsFor(root, p));
  }, /*zmq=*/true);
  fs::remove_all(root + "/local_2");
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    testing::RestoreLatest(c, t, testing::OptionsFor(root, p), StepChoice::Tier::kLocal, 7, /*lost=*/p == 2);
  }, /*zmq=*/true);
  fs::remove_all(root);
}

TEST(EmergencyManager, IntervalsAndOpenChecks) {
  const std::string root = TempDir("open");
  auto single = NewSingleProcessCoordinator();
  EmergencyOptions o;
  o.local_directory = root + "/local";
  o.persistent_directory = root + "/persistent";
  o.peer_copies = 0;
  o.local_save_interval_steps = 2;
  o.persistent_save_interval_steps = 3;
  auto m = EmergencyCheckpointManager::Open(o, *single, nullptr);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE((*m)->ShouldSave(2));
  EXPECT_TRUE((*m)->ShouldSave(3));
  EXPECT_FALSE((*m)->ShouldSave(5));
  EXPECT_FALSE((*m)->ShouldSavePersistent(4));
  // Peer copies without a transport, and a job that does not split.
  o.peer_copies = 1;
  auto no_transport = EmergencyCheckpointManager::Open(o, *single, nullptr);
  EXPECT_EQ(no_transport.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_transport.status().message().find("at most 0"), std::string::npos)
      << no_transport.status().ToString();
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn::emergency
