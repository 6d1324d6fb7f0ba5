#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cairn/coordinator.h"
#include "cairn/engine/convert/convert.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/fault_kvstore.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/layout/safetensors/safetensors_writer.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

// The key-value store a job's processes share (jax.distributed's, here in
// memory), for threads standing in for processes.
class SharedKv {
 public:
  CoordinatorCallbacks Callbacks() {
    CoordinatorCallbacks c;
    c.key_value_set = [this](std::string_view k, std::string_view v) {
      std::lock_guard lock(mu_);
      kv_[std::string(k)] = std::string(v);
      cv_.notify_all();
      return Status::OK();
    };
    c.blocking_key_value_get = [this](std::string_view k, Coordinator::Duration timeout) -> Result<std::string> {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, timeout, [&] { return kv_.count(std::string(k)) > 0; })) {
        return Status(StatusCode::kUnavailable, "timeout waiting for " + std::string(k));
      }
      return kv_[std::string(k)];
    };
    return c;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
};

std::vector<uint8_t> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<uint8_t> v(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float f = dist(rng);
    std::memcpy(&v[i * 4], &f, 4);
  }
  return v;
}

// A safetensors source with a few arrays.
std::map<std::string, std::vector<uint8_t>> WriteSource(std::shared_ptr<KvStore> store) {
  std::vector<ArrayInfo> arrays;
  std::map<std::string, std::vector<uint8_t>> data;
  for (int i = 0; i < 5; ++i) {
    std::string name = "layers." + std::to_string(i) + ".w";
    arrays.push_back({name, DType::kFloat32, {96, 40}, {96, 40}, 0, layout::SplitTreePath(name, '.')});
    data[name] = RandomFloats(96 * 40, i);
  }
  auto w = safetensors::CreateWriter(store, "src/", arrays, {});
  EXPECT_TRUE(w.ok());
  for (const std::string& name : (*w)->write_order()) {
    EXPECT_TRUE((*w)->WriteBox(name, Box::FromShape({96, 40}), data[name].data()).ok());
  }
  EXPECT_TRUE((*w)->Commit().ok());
  return data;
}

struct RankResult {
  Result<ConvertStats> stats = Status(StatusCode::kInternal, "not run");
  uint64_t writes = 0;
};

// Runs a 3-process conversion to AXLearn; process `failing` (if >= 0) has
// its destination writes fail from the first chunk on.
std::vector<RankResult> RunRanks(std::shared_ptr<MemoryKvStore> store, int failing) {
  const int n = 3;
  SharedKv kv;
  std::vector<RankResult> results(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      auto coordinator = NewCallbackCoordinator(rank, n, kv.Callbacks());
      auto dest = std::make_shared<FaultKvStore>(store);
      auto source = safetensors::OpenReader(store, "src/");
      ASSERT_TRUE(source.ok());
      ConvertOptions options;
      options.plan.dest_separator = '/';
      options.memory_budget = 16 << 10;  // chunks of a few rows: many per array
      options.threads = 2;
      options.verify = true;
      options.timeout = std::chrono::seconds(20);
      axlearn::WriterOptions w;
      w.step = 9;
      auto make = [&](const std::vector<ArrayInfo>& a) { return axlearn::CreateWriter(dest, "dst", a, w); };
      auto attach = [&](const std::vector<ArrayInfo>& a) {
        if (rank == failing) {
          dest->FailWritesFrom(0, Status(StatusCode::kResourceExhausted, "rank disk full (injected)"));
        }
        return axlearn::AttachWriter(dest, "dst", a, w);
      };
      auto open = [&] { return axlearn::OpenReader(store, "dst"); };
      results[rank].stats = ConvertDistributed(**source, make, attach, open, options, *coordinator);
      results[rank].writes = dest->writes_attempted();
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(ConvertDistributed, ThreeProcessesShareTheChunksAndOneCommits) {
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteSource(store);
  std::vector<RankResult> results = RunRanks(store, -1);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(results[rank].stats.ok()) << rank << ": " << results[rank].stats.status().ToString();
    EXPECT_EQ(results[rank].stats->bytes_written, 5u * 96 * 40 * 4);  // all processes' bytes
    EXPECT_GT(results[rank].writes, 5u) << "process " << rank << " wrote no share of the chunks";
  }
  auto reader = axlearn::OpenReader(store, "dst");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  for (const auto& [name, bytes] : data) {
    std::string path = name;
    std::replace(path.begin(), path.end(), '.', '/');
    std::vector<uint8_t> got(bytes.size());
    ASSERT_TRUE((*reader)->ReadBox(path, Box::FromShape({96, 40}), got.data()).ok()) << path;
    EXPECT_EQ(got, bytes) << path;
  }
}

TEST(ConvertDistributed, AFailureOnOneProcessFailsAllAndCommitsNothing) {
  auto store = std::make_shared<MemoryKvStore>();
  WriteSource(store);
  std::vector<RankResult> results = RunRanks(store, 2);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_FALSE(results[rank].stats.ok()) << rank;
    EXPECT_NE(results[rank].stats.status().message().find("process 2"), std::string_view::npos)
        << results[rank].stats.status().ToString();
    EXPECT_NE(results[rank].stats.status().message().find("rank disk full"), std::string_view::npos);
  }
  EXPECT_FALSE(store->Get("dst/index")->has_value());
}

}  // namespace
}  // namespace cairn::engine
