// The order of the restore protocol (manager_restore.cc): the healthy
// processes read (map) their own local steps while a process that lost its
// disk is still fetching its step from a peer, and a fetch that fails after
// they mapped still sends every process to the persistent tier, with the
// mappings dropped. 4 threads stand in for 4 processes in 2 replicas; the
// local directories are on /dev/shm, where local chunks are mapped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cairn/emergency/manager.h"
#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/emergency/zmq_transport.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/engine/testing/thread_coordinator.h"
#include "cairn/util/testing/proc_maps.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;

constexpr int kProcesses = 4;
constexpr int kReplicas = 2;
constexpr Index kRows = 512, kCols = 256;  // float32, 256 KiB per slot's rows

std::vector<uint8_t> StateAt(int64_t step) {
  return engine::testing::RandomFloatBytes(kRows * kCols, static_cast<uint32_t>(500 + step));
}

Box RowsOf(int p) { return Box({(p % 2) * kRows / 2, 0}, {kRows / 2, kCols}); }

// The emergency job's options (testing/emergency_job.h), with a persistent
// step every 2 and pieces sized for this test's larger state.
EmergencyOptions OptionsFor(const std::string& root, int p) {
  EmergencyOptions o = testing::OptionsFor(root, p);
  o.persistent_save_interval_steps = 2;
  o.save.timeout = std::chrono::seconds(120);
  o.transfer_piece_bytes = 16 << 10;  // a 256 KiB data file in 16 pieces
  return o;
}

// Lines of /proc/self/maps that name a file under `dir`.
int MappingsUnder(const std::string& dir) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find(dir) != std::string::npos;
  return n;
}

// The lost host's transport: at the 4th piece of a fetch, waits until every
// other process has mapped chunks of its own local step (at most `wait`, so
// a protocol that makes them wait for the fetch fails the test instead of
// hanging), notes whether they had, and with `corrupt` damages the piece.
class GatedTransport final : public PeerTransport {
 public:
  GatedTransport(std::shared_ptr<PeerTransport> inner, std::string root, bool corrupt, std::chrono::seconds wait)
      : inner_(std::move(inner)), root_(std::move(root)), corrupt_(corrupt), wait_(wait) {}
  int process_index() const override { return inner_->process_index(); }
  int process_count() const override { return inner_->process_count(); }
  Status Send(int dest, int tag, ByteView bytes, Duration timeout) override {
    return inner_->Send(dest, tag, bytes, timeout);
  }
  Expectation Expect(int source, int tag) override { return inner_->Expect(source, tag); }
  Result<Buffer> Receive(int source, int tag, size_t max_bytes, Duration timeout) override {
    return inner_->Receive(source, tag, max_bytes, timeout);
  }
  // Pieces come this way (the transport's own, so ZeroMQ's parts as received).
  Status ReceiveParts(int source, int tag, size_t max_bytes, Duration timeout,
                      const std::function<Status(ByteView first, ByteView second)>& consume) override {
    return inner_->ReceiveParts(source, tag, max_bytes, timeout, [&](ByteView first, ByteView second) {
      if (first.size() + second.size() <= 1024 || ++pieces_ != 4) return consume(first, second);
      const auto deadline = std::chrono::steady_clock::now() + wait_;
      while (!OthersMapped() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      others_mapped_during_fetch = OthersMapped();
      if (!corrupt_) return consume(first, second);
      Buffer b(first.size() + second.size());
      std::copy(first.begin(), first.end(), b.data());
      std::copy(second.begin(), second.end(), b.data() + first.size());
      b.data()[b.size() - 1] ^= 0x40;  // a byte of the data, past the frame
      return consume(b.view(), ByteView());
    });
  }
  std::atomic<bool> others_mapped_during_fetch{false};

 private:
  bool OthersMapped() const {
    for (int h : {0, 2, 3}) {
      if (MappingsUnder(root_ + "/local_" + std::to_string(h) + "/") == 0) return false;
    }
    return true;
  }
  std::shared_ptr<PeerTransport> inner_;
  std::string root_;
  bool corrupt_;
  std::chrono::seconds wait_;
  int pieces_ = 0;
};

struct Outcome {
  Result<RestoreReport> report = InternalError("not run");
  std::vector<uint8_t> rows = std::vector<uint8_t>(kRows / 2 * kCols * 4, 0xEE);
  std::shared_ptr<MappedBytes> mapped;
  std::string metadata_item;  // PrepareRestore's
  const uint8_t* data() const { return mapped ? mapped->data() : rows.data(); }
};

class RestoreOverlap : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cairn::testing::IsRamDisk("/dev/shm")) GTEST_SKIP() << "/dev/shm is no RAM disk: nothing would be mapped";
    root_ = "/dev/shm/cairn_restore_overlap_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
    // Steps 1-3 locally (2 and 3 kept), step 2 persistent.
    engine::testing::ThreadGroup group(kProcesses);
    InProcessNetwork network(kProcesses);
    std::vector<std::thread> threads;
    for (int p = 0; p < kProcesses; ++p) {
      threads.emplace_back([&, p] {
        auto m = EmergencyCheckpointManager::Open(OptionsFor(root_, p), group.Member(p), network.Endpoint(p));
        ASSERT_TRUE(m.ok()) << m.status().ToString();
        for (int64_t step = 1; step <= 3; ++step) {
          const std::vector<uint8_t> state = StateAt(step);
          engine::SaveLeaf w;
          w.path = {{"params", orbax::KeyType::kDict}, {"w", orbax::KeyType::kDict}};
          w.dtype = DType::kFloat32;
          w.shape = {kRows, kCols};
          w.write_shape = RowsOf(0).shape;
          w.num_replicas = kReplicas;
          const Box rows = RowsOf(p);
          w.shards.push_back({rows, state.data() + rows.origin[0] * kCols * 4, {}, p / 2});
          auto saved = (*m)->Save(step, {w});
          ASSERT_TRUE(saved.ok()) << saved.status().ToString();
          ASSERT_TRUE((*m)->WaitUntilFinished().ok());
        }
        EXPECT_TRUE((*m)->Close().ok());
      });
    }
    for (std::thread& t : threads) t.join();
    fs::remove_all(root_ + "/local_1");  // host 1 is lost
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  // Restores (`step`: nullopt for the latest) on 4 threads; process 1's
  // transport is gated (and corrupts a piece when `corrupt`).
  // `zmq`: ZeroMQ transports on localhost instead of in-process ones.
  std::vector<Outcome> Restore(std::optional<int64_t> step, bool corrupt, bool& others_mapped, bool zmq = false) {
    std::vector<Outcome> out(kProcesses);
    engine::testing::ThreadGroup group(kProcesses);
    InProcessNetwork network(kProcesses);
    // A requested step is agreed on before anyone reads: no need to wait long.
    const std::chrono::seconds wait(step ? 2 : 60);
    std::vector<std::shared_ptr<PeerTransport>> transports(kProcesses);
    std::vector<std::thread> opening;
    for (int p = 0; p < kProcesses; ++p) {
      opening.emplace_back([&, p] {
        if (!zmq) {
          transports[p] = network.Endpoint(p);
          return;
        }
        auto opened = NewZmqTransport(group.Member(p), "127.0.0.1", std::chrono::seconds(30));
        ASSERT_TRUE(opened.ok()) << opened.status().ToString();
        transports[p] = *opened;
      });
    }
    for (std::thread& t : opening) t.join();
    for (const auto& t : transports) {
      if (t == nullptr) return out;
    }
    auto gated = std::make_shared<GatedTransport>(transports[1], root_, corrupt, wait);
    std::vector<std::thread> threads;
    for (int p = 0; p < kProcesses; ++p) {
      threads.emplace_back([&, p] {
        std::shared_ptr<PeerTransport> t = p == 1 ? gated : transports[p];
        auto m = EmergencyCheckpointManager::Open(OptionsFor(root_, p), group.Member(p), t);
        ASSERT_TRUE(m.ok()) << m.status().ToString();
        std::vector<engine::ArrayToRestore> request = {
            {"params.w", DType::kFloat32, {{RowsOf(p), out[p].rows.data(), {}, &out[p].mapped}}, {}}};
        auto prepared = (*m)->PrepareRestore(step);
        if (!prepared.ok()) {
          out[p].report = prepared.status();
        } else {
          out[p].metadata_item = prepared->metadata_item;
          out[p].report = (*m)->Restore(*prepared, std::move(request));
        }
        EXPECT_TRUE((*m)->Close().ok());
      });
    }
    for (std::thread& t : threads) t.join();
    others_mapped = gated->others_mapped_during_fetch;
    return out;
  }

  static bool BitExact(const Outcome& o, int p, int64_t step) {
    const std::vector<uint8_t> want = StateAt(step);
    return std::memcmp(o.data(), want.data() + RowsOf(p).origin[0] * kCols * 4, o.rows.size()) == 0;
  }

  std::string root_;
};

TEST_F(RestoreOverlap, HealthyProcessesMapWhileTheLostHostFetches) {
  bool others_mapped = false;
  std::vector<Outcome> out = Restore(std::nullopt, /*corrupt=*/false, others_mapped);
  EXPECT_TRUE(others_mapped) << "processes 0, 2 and 3 had not mapped their steps while process 1 fetched";
  for (int p = 0; p < kProcesses; ++p) {
    ASSERT_TRUE(out[p].report.ok()) << "process " << p << ": " << out[p].report.status().ToString();
    EXPECT_EQ(out[p].report->tier, StepChoice::Tier::kLocal) << p;
    EXPECT_EQ(out[p].report->step, 3) << p;
    EXPECT_NE(out[p].mapped, nullptr) << "process " << p << " copied instead of mapping";
    EXPECT_TRUE(BitExact(out[p], p, 3)) << p;
  }
  EXPECT_GT(out[1].report->bytes_fetched, 0u);
  EXPECT_EQ(out[0].report->bytes_fetched, 0u);
}

// The same over ZeroMQ, whose receiver checks and writes the pieces from
// the message parts as received (ReceiveParts).
TEST_F(RestoreOverlap, OverZeroMq) {
  if (!ZmqTransportAvailable()) GTEST_SKIP() << "built without ZeroMQ";
  bool others_mapped = false;
  std::vector<Outcome> out = Restore(std::nullopt, /*corrupt=*/false, others_mapped, /*zmq=*/true);
  EXPECT_TRUE(others_mapped);
  for (int p = 0; p < kProcesses; ++p) {
    ASSERT_TRUE(out[p].report.ok()) << "process " << p << ": " << out[p].report.status().ToString();
    EXPECT_EQ(out[p].report->tier, StepChoice::Tier::kLocal) << p;
    EXPECT_NE(out[p].mapped, nullptr) << p;
    EXPECT_TRUE(BitExact(out[p], p, 3)) << p;
  }
}

TEST_F(RestoreOverlap, AFetchFailingAfterTheOthersMappedSendsEveryoneToThePersistentTier) {
  bool others_mapped = false;
  std::vector<Outcome> out = Restore(std::nullopt, /*corrupt=*/true, others_mapped);
  EXPECT_TRUE(others_mapped) << "processes 0, 2 and 3 had not mapped their steps when process 1's fetch failed";
  for (int p = 0; p < kProcesses; ++p) {
    ASSERT_TRUE(out[p].report.ok()) << "process " << p << ": " << out[p].report.status().ToString();
    EXPECT_EQ(out[p].report->tier, StepChoice::Tier::kPersistent) << p;
    EXPECT_EQ(out[p].report->step, 2) << p;
    EXPECT_TRUE(BitExact(out[p], p, 2)) << p;
    std::string log;
    for (const std::string& line : out[p].report->log) log += line + "\n";
    EXPECT_NE(log.find("crc32c mismatch"), std::string::npos) << "process " << p << ":\n" << log;
  }
  // The lost host read the tree from the step everyone falls back to.
  EXPECT_EQ(out[1].metadata_item, root_ + "/persistent/2/default");
  EXPECT_EQ(out[0].metadata_item, root_ + "/local_0/3/state");
  // The local steps' mappings were dropped before the persistent read.
  EXPECT_EQ(MappingsUnder(root_ + "/local_"), 0);
}

// A requested step is never replaced: the fetch is agreed on before anyone
// reads, and every process fails with it (nothing mapped, no fallback).
TEST_F(RestoreOverlap, ARequestedStepWhoseFetchFailsFailsEverywhere) {
  bool others_mapped = true;
  std::vector<Outcome> out = Restore(3, /*corrupt=*/true, others_mapped);
  EXPECT_FALSE(others_mapped);
  for (int p = 0; p < kProcesses; ++p) {
    ASSERT_FALSE(out[p].report.ok()) << "process " << p;
    EXPECT_NE(out[p].report.status().message().find("crc32c mismatch"), std::string::npos)
        << out[p].report.status().ToString();
    EXPECT_EQ(out[p].mapped, nullptr) << p;
  }
  EXPECT_EQ(MappingsUnder(root_ + "/local_"), 0);
}

}  // namespace
}  // namespace cairn::emergency
