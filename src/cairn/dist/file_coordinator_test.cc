// The file-based coordinator (file_coordinator.h), with threads standing in
// for processes that share a directory and a barrier.
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cairn/dist/file_coordinator.h"

namespace cairn::dist {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

fs::path TestDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("cairn_file_coordinator_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(FileCoordinator, ProcessesSharingABarrierRunCollectivesAndCleanUp) {
  const fs::path root = TestDir("collectives");
  const std::string checkpoint = (root / "ckpt").string() + "/";
  const std::string coordination = (root / ".cairn-coordination.ckpt").string();
  EXPECT_EQ(CoordinationDirectoryFor(checkpoint), coordination);
  fs::create_directories(coordination);
  std::ofstream(coordination + "/stale") << "from a crashed save";  // emptied by process 0

  constexpr int kCount = 3;
  std::barrier sync(kCount);
  std::vector<std::string> barriers_seen[kCount];
  NamedBarrier barrier_fns[kCount];
  std::vector<std::vector<std::string>> gathered(kCount);
  std::vector<std::string> broadcast(kCount);
  std::vector<Status> ends(kCount);
  bool dir_seen_during_save = true;
  std::vector<std::thread> threads;
  for (int i = 0; i < kCount; ++i) {
    barrier_fns[i] = [&, i](std::string_view name) {
      barriers_seen[i].emplace_back(name);
      sync.arrive_and_wait();
      return Status::OK();
    };
    threads.emplace_back([&, i] {
      Result<SharedFileCoordination> c = BeginSharedFileCoordination(checkpoint, i, kCount, barrier_fns[i]);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_EQ(c->directory, coordination);
      EXPECT_EQ(c->coordinator->process_index(), i);
      EXPECT_FALSE(fs::exists(coordination + "/stale"));
      Result<std::vector<std::string>> g = c->coordinator->AllGather("sizes", "v" + std::to_string(i), seconds(30));
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      gathered[i] = *g;
      Result<std::string> b = c->coordinator->Broadcast("plan", 2, i == 2 ? "the plan" : "", seconds(30));
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      broadcast[i] = *b;
      ASSERT_TRUE(c->coordinator->Barrier("done", seconds(30)).ok());
      if (!fs::is_directory(coordination)) dir_seen_during_save = false;
      ends[i] = EndSharedFileCoordination(c->directory, i, barrier_fns[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(gathered[i], (std::vector<std::string>{"v0", "v1", "v2"})) << i;
    EXPECT_EQ(broadcast[i], "the plan") << i;
    EXPECT_TRUE(ends[i].ok()) << ends[i].ToString();
    EXPECT_EQ(barriers_seen[i], (std::vector<std::string>{"cairn_save_coordination", "cairn_save_done"})) << i;
  }
  EXPECT_TRUE(dir_seen_during_save);
  EXPECT_FALSE(fs::exists(coordination)) << "process 0 removes the directory at the end";
  fs::remove_all(root);
}

TEST(FileCoordinator, AMissingProcessTimesOutNamingTheKeyAndDirectory) {
  const fs::path root = TestDir("timeout");
  std::unique_ptr<Coordinator> c = NewFileCoordinator(root.string(), 0, 2);
  Result<std::vector<std::string>> g = c->AllGather("sizes", "v0", std::chrono::milliseconds(50));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(g.status().message().find(root.string()), std::string::npos) << g.status().ToString();
  EXPECT_NE(g.status().message().find("sizes"), std::string::npos) << g.status().ToString();
  fs::remove_all(root);
}

TEST(FileCoordinator, RefusesAUrlAndABadIndex) {
  NamedBarrier barrier = [](std::string_view) { return Status::OK(); };
  Result<SharedFileCoordination> c = BeginSharedFileCoordination("s3://bucket/ckpt", 0, 2, barrier);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("s3://bucket/ckpt"), std::string::npos) << c.status().ToString();
  c = BeginSharedFileCoordination("/tmp/x", 2, 2, barrier);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("process index 2"), std::string::npos) << c.status().ToString();
}

TEST(FileCoordinator, ChoosesTheSaveCoordinator) {
  SaveCoordinatorFacts f;
  f.checkpoint_path = "/ckpt/3";
  f.given = true;
  f.process_count = 4;
  EXPECT_EQ(*ChooseSaveCoordinator(f), CoordinatorSource::kGiven);
  f.given = false;
  f.process_count = 1;
  EXPECT_EQ(*ChooseSaveCoordinator(f), CoordinatorSource::kDetected);
  f.process_count = 4;
  f.runtime_runs_these_processes = true;
  EXPECT_EQ(*ChooseSaveCoordinator(f), CoordinatorSource::kJobRuntime);
  f.runtime_runs_these_processes = false;
  Result<CoordinatorSource> r = ChooseSaveCoordinator(f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("need a `barrier` callable or a `coordinator`"), std::string::npos)
      << r.status().ToString();
  f.has_barrier = true;
  EXPECT_EQ(*ChooseSaveCoordinator(f), CoordinatorSource::kSharedFiles);
  f.checkpoint_path = "gs://b/ckpt/3";
  r = ChooseSaveCoordinator(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gs://b/ckpt/3"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace cairn::dist
