// The persistent tier restored by the whole job at once: threads standing
// in for 4 processes of one host in 2 data-parallel replicas, each replica
// holding the same rows. The replicas need the same compressed chunks, so
// each chunk is decoded once for the host and its other reader copies its
// part out of the shared window (engine/restore_host_share.h), bit-exact;
// before, every replica read and decoded the step on its own.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;
using testing::kProcesses;
using testing::kReplicas;

constexpr int64_t kRows = 512, kCols = 256;   // float32: 512 KiB
constexpr int64_t kSlotRows = kRows / (kProcesses / kReplicas);  // a chunk of 256 KiB per slot

Box SlotOf(int p) { return Box({kSlotRows * (p % (kProcesses / kReplicas)), 0}, {kSlotRows, kCols}); }

// The numbers of the persistent log line's "chunks: A read for this process
// alone, B decoded for this host, C taken from another process's decoding".
std::vector<int> ChunkCounts(const std::vector<std::string>& log) {
  static const std::regex counts(
      R"(chunks: (\d+) read for this process alone, (\d+) decoded for this host, (\d+) taken from another)");
  for (const std::string& line : log) {
    std::smatch m;
    if (std::regex_search(line, m, counts)) return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
  }
  return {};
}

TEST(EmergencyPersistentRestore, AHostsReplicasDecodeEachSharedChunkOnce) {
  const std::string root = ::cairn::testing::TestDir("cairn_emergency_test", "persistent_shared");
  const std::vector<uint8_t> values = engine::testing::RandomFloatBytes(kRows * kCols, 77);
  auto options = [&](int p) {
    EmergencyOptions o = testing::OptionsFor(root, p);
    o.persistent_save_interval_steps = 1;  // step 1 goes to the persistent tier
    o.transfer_piece_bytes = 64 << 10;
    return o;
  };
  testing::RunThreadJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    auto m = EmergencyCheckpointManager::Open(options(p), c, t);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    engine::SaveLeaf w;
    w.path = {{"params", orbax::KeyType::kDict}, {"w", orbax::KeyType::kDict}};
    w.dtype = DType::kFloat32;
    w.shape = {kRows, kCols};
    w.write_shape = {kSlotRows, kCols};
    w.num_replicas = kReplicas;
    const Box rows = SlotOf(p);
    w.shards.push_back({rows, values.data() + rows.origin[0] * kCols * 4, {}, p / (kProcesses / kReplicas)});
    auto saved = (*m)->Save(1, {w});
    ASSERT_TRUE(saved.ok()) << saved.status().ToString();
    ASSERT_TRUE((*m)->WaitUntilFinished().ok());
    EXPECT_TRUE((*m)->Close().ok());
  });
  ASSERT_TRUE(fs::exists(root + "/persistent/1/default/_METADATA"));
  for (int p = 0; p < kProcesses; ++p) fs::remove_all(root + "/local_" + std::to_string(p));

  std::vector<std::vector<int>> counts(kProcesses);
  testing::RunThreadJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    auto m = EmergencyCheckpointManager::Open(options(p), c, t);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::vector<uint8_t> out(kSlotRows * kCols * 4, 0xEE);
    std::vector<engine::ArrayToRestore> request = {{"params.w", DType::kFloat32, {{SlotOf(p), out.data(), {}}}, {}}};
    auto report = (*m)->RestoreStep(std::nullopt, request);
    ASSERT_TRUE(report.ok()) << "process " << p << ": " << report.status().ToString();
    std::string log;
    for (const std::string& line : report->log) log += line + "\n";
    EXPECT_EQ(report->tier, StepChoice::Tier::kPersistent) << log;
    EXPECT_EQ(report->step, 1) << log;
    EXPECT_TRUE(std::equal(out.begin(), out.end(), values.begin() + SlotOf(p).origin[0] * kCols * 4))
        << "process " << p << "\n" << log;
    counts[p] = ChunkCounts(report->log);
    EXPECT_EQ(counts[p].size(), 3u) << log;
    EXPECT_TRUE((*m)->Close().ok());
  });
  // Two chunks, each needed by the two replicas of its rows: decoded once
  // each, and taken once each by the other replica.
  int alone = 0, decoded = 0, taken = 0;
  for (const std::vector<int>& c : counts) {
    if (c.size() != 3) continue;
    alone += c[0];
    decoded += c[1];
    taken += c[2];
  }
  EXPECT_EQ(decoded, 2);
  EXPECT_EQ(taken, 2);
  EXPECT_EQ(alone, 0);
}

}  // namespace
}  // namespace cairn::emergency
