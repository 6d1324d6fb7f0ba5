// The persistent tier restored by the whole job at once: threads standing
// in for 4 processes of one host in 2 data-parallel replicas, each replica
// holding the same rows. The replicas need the same compressed chunks, so
// each chunk is decoded once for the host and its other reader copies its
// part out of the shared window (engine/restore_host_share.h), bit-exact;
// before, every replica read and decoded the step on its own. Where the
// boxes may be mappings, each replica maps the window's pages instead.
#include <gtest/gtest.h>

#include <algorithm>
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

// Saves step 1 to the persistent tier of a fresh job under `name`, removes
// every local directory, and restores it on every process, each its slot's
// rows (as a mapping where `maps`): the chunk counts of each process's log
// and what it restored.
struct Restored {
  std::vector<int> counts;  // read alone, decoded for the host, taken
  uint64_t bytes_mapped = 0;
};

std::vector<Restored> SaveAndRestorePersistent(const std::string& name, bool maps) {
  const std::string root = ::cairn::testing::TestDir("cairn_emergency_test", name);
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
  EXPECT_TRUE(fs::exists(root + "/persistent/1/default/_METADATA"));
  for (int p = 0; p < kProcesses; ++p) fs::remove_all(root + "/local_" + std::to_string(p));

  std::vector<Restored> out(kProcesses);
  testing::RunThreadJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    auto m = EmergencyCheckpointManager::Open(options(p), c, t);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::vector<uint8_t> buffer(kSlotRows * kCols * 4, 0xEE);
    std::shared_ptr<MappedBytes> mapped;
    engine::BoxToRestore box{SlotOf(p), buffer.data(), {}};
    if (maps) box.mapped = &mapped;
    std::vector<engine::ArrayToRestore> request = {{"params.w", DType::kFloat32, {box}, {}}};
    auto report = (*m)->RestoreStep(std::nullopt, request);
    ASSERT_TRUE(report.ok()) << "process " << p << ": " << report.status().ToString();
    std::string log;
    for (const std::string& line : report->log) log += line + "\n";
    EXPECT_EQ(report->tier, StepChoice::Tier::kPersistent) << log;
    EXPECT_EQ(report->step, 1) << log;
    const uint8_t* got = buffer.data();
    if (mapped != nullptr) {
      // Mapped: the buffer is left as it was.
      EXPECT_TRUE(std::all_of(buffer.begin(), buffer.end(), [](uint8_t b) { return b == 0xEE; })) << p;
      ASSERT_EQ(mapped->size(), buffer.size()) << p;
      got = mapped->data();
    }
    EXPECT_TRUE(std::equal(got, got + buffer.size(), values.begin() + SlotOf(p).origin[0] * kCols * 4))
        << "process " << p << "\n" << log;
    out[p].counts = ChunkCounts(report->log);
    out[p].bytes_mapped = report->bytes_mapped;
    EXPECT_EQ(out[p].counts.size(), 3u) << log;
    EXPECT_TRUE((*m)->Close().ok());
  });
  return out;
}

// Two chunks, each needed by the two replicas of its rows: decoded once
// each, and taken once each by the other replica.
void ExpectEachChunkDecodedOnce(const std::vector<Restored>& out) {
  int alone = 0, decoded = 0, taken = 0;
  for (const Restored& r : out) {
    if (r.counts.size() != 3) continue;
    alone += r.counts[0];
    decoded += r.counts[1];
    taken += r.counts[2];
  }
  EXPECT_EQ(decoded, 2);
  EXPECT_EQ(taken, 2);
  EXPECT_EQ(alone, 0);
}

TEST(EmergencyPersistentRestore, AHostsReplicasDecodeEachSharedChunkOnce) {
  const std::vector<Restored> out = SaveAndRestorePersistent("persistent_shared", /*maps=*/false);
  ExpectEachChunkDecodedOnce(out);
  for (const Restored& r : out) EXPECT_EQ(r.bytes_mapped, 0u);
}

// Boxes that may be mappings (as Python asks for): each replica's rows are
// the pages its host decoded once, mapped, not copied into fresh memory.
TEST(EmergencyPersistentRestore, ReplicasMapTheChunksTheirHostDecodedOnce) {
  const std::vector<Restored> out = SaveAndRestorePersistent("persistent_mapped", /*maps=*/true);
  ExpectEachChunkDecodedOnce(out);
  for (int p = 0; p < kProcesses; ++p) {
    EXPECT_EQ(out[p].bytes_mapped, static_cast<uint64_t>(kSlotRows * kCols * 4)) << "process " << p;
  }
}

}  // namespace
}  // namespace cairn::emergency
