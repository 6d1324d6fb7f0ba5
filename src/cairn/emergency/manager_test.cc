// The emergency manager with threads standing in for 4 processes in 2
// data-parallel replicas (testing/emergency_job.h): saves with peer copies,
// a lost host restored from its peer (with process ids changed by the
// restart), and the fallback to the persistent tier when both holders of a
// shard are lost. The same job runs under MPI in mpi_manager_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <future>
#include <thread>

#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/emergency/zmq_transport.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/testing/thread_coordinator.h"
#include "cairn/util/testing/flip_bytes.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;
using testing::kProcesses;

std::string TempDir(const std::string& name) { return ::cairn::testing::TestDir("cairn_emergency_test", name); }

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

// The local tier is uncompressed (each chunk ends in its CRC-32C): a
// flipped byte in a process's own step counts that copy as missing, and the
// rows come from another holder, bit-exact; with every copy of the rows
// damaged, every process falls back to the persistent tier.
TEST(EmergencyManager, ADamagedCopyCountsAsMissingThenThePersistentTierServes) {
  const std::string root = TempDir("damaged");
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    testing::SaveSteps(c, t, testing::OptionsFor(root, p));
  });
  // Rows 0..3 of `params.w` at step 7: processes 0 and 2 save them.
  const testing::JobState at7 = testing::StateAt(7);
  const std::string rows(reinterpret_cast<const char*>(at7.w.data()), 4 * 6 * 4);
  ASSERT_GE(cairn::testing::FlipByteOfEveryCopy(root + "/local_0/7", rows), 1);
  // Every process restores the latest step and checks it is `tier` / `step`,
  // bit-exact; its log goes to logs[p].
  std::vector<std::string> logs(kProcesses);
  auto restore_all = [&](StepChoice::Tier tier, int64_t step) {
    RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
      auto m = EmergencyCheckpointManager::Open(testing::OptionsFor(root, p), c, t);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      testing::Restored out;
      auto report = (*m)->RestoreStep(std::nullopt, testing::RequestOf(out, p));
      ASSERT_TRUE(report.ok()) << "process " << p << ": " << report.status().ToString();
      logs[p].clear();
      for (const std::string& line : report->log) logs[p] += line + "\n";
      EXPECT_EQ(report->tier, tier) << logs[p];
      EXPECT_EQ(report->step, step) << logs[p];
      EXPECT_TRUE(testing::BitExact(out, p, step)) << "process " << p << "\n" << logs[p];
      EXPECT_TRUE((*m)->Close().ok());
    });
  };
  restore_all(StepChoice::Tier::kLocal, 7);
  EXPECT_NE(logs[0].find("is damaged, counted as missing"), std::string::npos) << logs[0];
  EXPECT_NE(logs[0].find("crc32c mismatch"), std::string::npos) << logs[0];
  EXPECT_NE(logs[0].find("fetched process"), std::string::npos) << logs[0];
  // Every copy of those rows at step 7 damaged (both owners' steps and the
  // peer copies): the newest persistent step, bit-exact everywhere.
  int damaged = 0;
  for (int p = 0; p < kProcesses; ++p) {
    damaged += cairn::testing::FlipByteOfEveryCopy(root + "/local_" + std::to_string(p), rows);
  }
  EXPECT_GE(damaged, 3) << "process 2's step and the peer copies of 0's and 2's";
  restore_all(StepChoice::Tier::kPersistent, 5);
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

// Immutable shards (a jax.Array's) are not copied before Save returns: with
// the budget full, Save returns anyway, and both tiers save what the buffer
// holds when the background reads it, after Save returned (here changed
// behind the manager's back to prove it; a caller never does). The shard is
// held column-major, so the background copies it chunk by chunk within the
// budget and cannot read it before the test frees the budget. `hold` lives
// until both writes are done and is gone when WaitUntilFinished returns.
// The control saves the same shard as mutable: Save copies it, and the
// change made after Save returned is not saved.
TEST(EmergencyManager, ImmutableShardsAreReadAfterSaveReturnsAndHeldUntilWritten) {
  for (const bool immutable : {true, false}) {
    SCOPED_TRACE(immutable ? "immutable" : "mutable (control)");
    const std::string root = TempDir(immutable ? "immutable" : "mutable");
    auto single = NewSingleProcessCoordinator();
    EmergencyOptions o;
    o.local_directory = root + "/local";
    o.persistent_directory = root + "/persistent";
    o.peer_copies = 0;
    o.budget = std::make_shared<engine::ByteBudget>(64 << 10);
    auto m = EmergencyCheckpointManager::Open(o, *single, nullptr);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::vector<float> f(64 * 256);  // f[col * 64 + row] = row * 256 + col
    for (Index row = 0; row < 64; ++row) {
      for (Index col = 0; col < 256; ++col) f[col * 64 + row] = static_cast<float>(row * 256 + col);
    }
    engine::SaveLeaf leaf;
    leaf.path = {{"params", orbax::KeyType::kDict}, {"f", orbax::KeyType::kDict}};
    leaf.dtype = DType::kFloat32;
    leaf.shape = {64, 256};
    engine::ShardToSave shard;
    shard.box = Box({0, 0}, {64, 256});
    shard.data = f.data();
    shard.byte_strides = {4, 64 * 4};
    shard.immutable = immutable;
    leaf.shards = {shard};
    auto hold = std::make_shared<int>(0);
    std::weak_ptr<int> held = hold;
    if (immutable) o.budget->Acquire(64 << 10);  // full until the test frees it
    auto saving = std::async(std::launch::async, [&] {
      return (*m)->Save(1, {leaf}, /*force=*/true, std::move(hold));
    });
    const bool returned = saving.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    if (!returned) o.budget->Release(64 << 10);  // a Save that copies waits for the budget
    ASSERT_TRUE(returned) << "Save waited for the budget: it copied the shard";
    auto saved = saving.get();
    ASSERT_TRUE(saved.ok()) << saved.status().ToString();
    if (immutable) {
      EXPECT_FALSE(held.expired()) << "released before the writes read the shard";
    }
    f[0] = -1.0f;  // after Save returned
    if (immutable) o.budget->Release(64 << 10);
    Status done = (*m)->WaitUntilFinished();
    ASSERT_TRUE(done.ok()) << done.ToString();
    EXPECT_TRUE(held.expired());
    for (const auto& [dir, item] : {std::pair<std::string, std::string>{root + "/local/1", "state"},
                                    {root + "/persistent/1", "default"}}) {
      std::vector<float> back(64 * 256, 7.0f);
      engine::RestoreRequest q;
      q.directory = dir;
      q.item_name = item;
      q.arrays = {{"params.f", std::nullopt, {{Box({0, 0}, {64, 256}), back.data(), {}}}, {}}};
      Status read = engine::Restore(q);
      ASSERT_TRUE(read.ok()) << dir << ": " << read.ToString();
      EXPECT_EQ(back[0], immutable ? -1.0f : 0.0f) << dir;
      EXPECT_EQ(back[1], 1.0f) << dir;                // row 0, column 1
      EXPECT_EQ(back[256 * 63 + 255], 64.0f * 256 - 1) << dir;
    }
    EXPECT_TRUE((*m)->Close().ok());
    fs::remove_all(root);
  }
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
