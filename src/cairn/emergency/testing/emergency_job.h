// A small training job for the emergency manager's tests, run the same way
// by threads standing in for processes (manager_test.cc) and by MPI ranks
// (mpi_manager_test.cc): 4 processes in 2 data-parallel replicas.
//
// State at step s: `params.w` float32 [8, 6], split by rows between the 2
// processes of a replica (process p holds rows [4*slot, 4*slot + 4), its
// replica id being its replica); `params.b` float32 [6], held whole by every
// process (4 replicas). Values depend on the step, so a restore of the wrong
// step is caught.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cairn/emergency/manager.h"
#include "cairn/emergency/transport.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/engine/testing/thread_coordinator.h"

namespace cairn::emergency::testing {

inline constexpr int kProcesses = 4;
inline constexpr int kReplicas = 2;

// Runs `body(coordinator, transport, p)` for every process p on a thread of
// its own, with a fresh in-process network; returns once all are done.
inline void RunThreadJob(const std::function<void(Coordinator&, std::shared_ptr<PeerTransport>, int)>& body) {
  engine::testing::ThreadGroup group(kProcesses);
  InProcessNetwork network(kProcesses);
  std::vector<std::thread> threads;
  for (int p = 0; p < kProcesses; ++p) {
    threads.emplace_back([&, p] { body(group.Member(p), network.Endpoint(p), p); });
  }
  for (std::thread& t : threads) t.join();
}

struct JobState {
  std::vector<uint8_t> w;  // the whole [8, 6] array
  std::vector<uint8_t> b;  // [6]
};

inline JobState StateAt(int64_t step) {
  return {engine::testing::RandomFloatBytes(48, static_cast<uint32_t>(1000 + step)),
          engine::testing::RandomFloatBytes(6, static_cast<uint32_t>(2000 + step))};
}

inline Box RowsOf(int process) {
  const int slot = process % (kProcesses / kReplicas);
  return Box({4 * slot, 0}, {4, 6});
}

// The leaves process `p` saves (pointing into `state`).
inline std::vector<engine::SaveLeaf> LeavesOf(const JobState& state, int p) {
  engine::SaveLeaf w;
  w.path = {{"params", orbax::KeyType::kDict}, {"w", orbax::KeyType::kDict}};
  w.dtype = DType::kFloat32;
  w.shape = {8, 6};
  w.write_shape = {4, 6};
  w.num_replicas = kReplicas;
  const Box rows = RowsOf(p);
  w.shards.push_back({rows, state.w.data() + rows.origin[0] * 6 * 4, {}, p / (kProcesses / kReplicas)});
  engine::SaveLeaf b;
  b.path = {{"params", orbax::KeyType::kDict}, {"b", orbax::KeyType::kDict}};
  b.dtype = DType::kFloat32;
  b.shape = {6};
  b.num_replicas = kProcesses;
  b.shards.push_back({Box({0}, {6}), state.b.data(), {}, p});
  return {w, b};
}

// Buffers for process p's restore of the same sharding.
struct Restored {
  std::vector<uint8_t> w = std::vector<uint8_t>(4 * 6 * 4, 0xEE);
  std::vector<uint8_t> b = std::vector<uint8_t>(6 * 4, 0xEE);
};

inline std::vector<engine::ArrayToRestore> RequestOf(Restored& out, int p) {
  return {{"params.w", DType::kFloat32, {{RowsOf(p), out.w.data(), {}}}, {}},
          {"params.b", DType::kFloat32, {{Box({0}, {6}), out.b.data(), {}}}, {}}};
}

// Whether `out` holds process p's part of the state at `step`, bit-exact.
inline bool BitExact(const Restored& out, int p, int64_t step) {
  const JobState want = StateAt(step);
  const Box rows = RowsOf(p);
  return std::memcmp(out.w.data(), want.w.data() + rows.origin[0] * 6 * 4, out.w.size()) == 0 &&
         out.b == want.b;
}

inline EmergencyOptions OptionsFor(const std::string& root, int local_dir_index) {
  EmergencyOptions o;
  o.local_directory = root + "/local_" + std::to_string(local_dir_index);
  o.persistent_directory = root + "/persistent";
  o.num_replicas = kReplicas;
  o.peer_copies = 1;
  o.local_save_interval_steps = 1;
  o.local_max_to_keep = 2;
  o.persistent_save_interval_steps = 5;
  o.save.timeout = std::chrono::seconds(60);
  o.transfer_piece_bytes = 64;  // many pieces even for a small state
  return o;
}

}  // namespace cairn::emergency::testing

namespace cairn::emergency::testing {

// Process p of the job saves steps 1..7 (local every step, persistent every
// 5) and checks what its local directory holds afterwards.
inline void SaveSteps(Coordinator& c, std::shared_ptr<PeerTransport> t, const EmergencyOptions& o) {
  namespace fs = std::filesystem;
  const int p = c.process_index();
  auto m = EmergencyCheckpointManager::Open(o, c, t);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (int64_t step = 1; step <= 7; ++step) {
    const JobState state = StateAt(step);
    auto saved = (*m)->Save(step, LeavesOf(state, p));
    ASSERT_TRUE(saved.ok()) << "process " << p << " step " << step << ": " << saved.status().ToString();
    EXPECT_TRUE(*saved);
  }
  Status done = (*m)->WaitUntilFinished();
  ASSERT_TRUE(done.ok()) << done.ToString();
  const fs::path local = o.local_directory;
  // Orbax's local layout, with retention (2 steps) applied.
  EXPECT_FALSE(fs::exists(local / "5"));
  const fs::path step = local / "7";
  for (const char* f : {"_CHECKPOINT_METADATA", "commit_success.txt", "state/_METADATA", "state/manifest.ocdbt",
                        "process_metadata/global_process_metadata.json", "process_metadata/mesh_metadata.json",
                        "cairn_local_step.json"}) {
    EXPECT_TRUE(fs::exists(step / f)) << (step / f);
  }
  EXPECT_TRUE(fs::exists(step / "state" / ("ocdbt.process_" + std::to_string(p)))) << step;
  // The peer's copies of its last two steps.
  const int source = SourceOf(ReplicaLayout{kProcesses, kReplicas}, p, 1);
  const fs::path copies = local / "peer_copies" / ("process_" + std::to_string(source));
  EXPECT_TRUE(fs::exists(copies / "7" / "state" / ("ocdbt.process_" + std::to_string(source)))) << copies;
  EXPECT_TRUE(fs::exists(copies / "6" / "commit_success.txt")) << copies;
  EXPECT_FALSE(fs::exists(copies / "5")) << copies;
  EXPECT_TRUE(fs::exists(fs::path(o.persistent_directory) / "5" / "default" / "_METADATA"));
  EXPECT_TRUE((*m)->Close().ok());
}

// Process p of a restarted job restores the latest step and checks it is
// `want_tier`/`want_step`, bit-exact. `lost`: whether this process's local
// directory was lost (so its shards must come from a peer).
inline void RestoreLatest(Coordinator& c, std::shared_ptr<PeerTransport> t, const EmergencyOptions& o,
                          StepChoice::Tier want_tier, int64_t want_step, bool lost) {
  const int p = c.process_index();
  auto m = EmergencyCheckpointManager::Open(o, c, t);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto latest = (*m)->LatestStep();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ(**latest, want_step);
  Restored out;
  auto report = (*m)->RestoreStep(std::nullopt, RequestOf(out, p));
  ASSERT_TRUE(report.ok()) << "process " << p << ": " << report.status().ToString();
  std::string log;
  for (const std::string& line : report->log) log += line + "\n";
  EXPECT_EQ(report->tier, want_tier) << log;
  EXPECT_EQ(report->step, want_step) << log;
  EXPECT_TRUE(BitExact(out, p, want_step)) << "process " << p << "\n" << log;
  if (want_tier == StepChoice::Tier::kLocal) {
    if (lost) {
      EXPECT_GT(report->bytes_fetched, 0u) << log;
      EXPECT_EQ(report->bytes_from_peers, 4u * 6 * 4 + 6 * 4) << log;
      EXPECT_NE(log.find("fetched process"), std::string::npos) << log;
    } else {
      EXPECT_EQ(report->bytes_from_own_disk, 4u * 6 * 4 + 6 * 4) << log;
    }
  } else {
    EXPECT_EQ(report->bytes_from_persistent, 4u * 6 * 4 + 6 * 4) << log;
    EXPECT_NE(log.find("step 5 is the newest persistent step; local step 7 is incomplete"), std::string::npos) << log;
  }
  EXPECT_TRUE((*m)->Close().ok());
}

}  // namespace cairn::emergency::testing
