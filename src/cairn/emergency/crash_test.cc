// Crash consistency of the emergency manager. A child process runs the
// 4-process job of testing/emergency_job.h (threads standing in for
// processes, saving steps 1..3) and is killed with SIGKILL by the
// EmergencyOptions::at_point observer the child passes (the spec
// "<point>@<step>@<process>" comes from the parent test): during process 0's local save of step 3
// (before its rename), or half-way through process 1's receipt of process
// 3's step 3. Afterwards nothing unfinished is listed, and a restarted job
// that has also lost a host restores the newest step that is really
// complete, bit-exact. A control child whose hook never fires saves all 3
// steps and their copies.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/engine/testing/thread_coordinator.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;
using testing::kProcesses;

void RunJob(const std::function<void(Coordinator&, std::shared_ptr<PeerTransport>, int)>& body) {
  testing::RunThreadJob(body);
}

using HeldList = std::vector<std::tuple<int, int, int64_t>>;

class EmergencyCrash : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() / ("cairn_emergency_crash_" + std::to_string(::getpid()))).string();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Runs the saving job (EmergencyCrashChild.SaveJob) in a fresh process
  // of this test binary, killed at `crash_at` ("<point>@<step>@<process>");
  // returns its wait status. (A fresh exec, not a bare fork: the parent's
  // thread pools do not survive a fork.)
  // `environment`: more variables for the child.
  int SaveInChild(const std::string& crash_at, const std::vector<std::pair<std::string, std::string>>& environment = {}) {
    const std::string exe = fs::read_symlink("/proc/self/exe").string();
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (const auto& [name, value] : environment) ::setenv(name.c_str(), value.c_str(), 1);
      ::setenv("CAIRN_EMERGENCY_CRASH_CHILD_AT", crash_at.c_str(), 1);
      ::setenv("CAIRN_EMERGENCY_CRASH_CHILD_ROOT", root_.c_str(), 1);
      ::execl(exe.c_str(), exe.c_str(), "--gtest_filter=EmergencyCrashChild.SaveJob", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }

  // Steps and copies process directory `host` lists (kind, owner, step).
  HeldList Held(int host) {
    auto held = ListHoldings(*orbax::OpenLocation(Local(host)));
    EXPECT_TRUE(held.ok()) << held.status().ToString();
    HeldList out;
    if (held.ok()) {
      for (const Holding& h : *held) {
        out.emplace_back(h.kind == Holding::Kind::kOwn ? 0 : 1, h.record.process_index, h.record.step);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Process p of a restarted job restores the latest step: `want_step`
  // of the local tier, bit-exact; the lost host's shards come from peers.
  void Restore(Coordinator& c, std::shared_ptr<PeerTransport> t, int64_t want_step, int lost) {
    const int p = c.process_index();
    auto m = EmergencyCheckpointManager::Open(testing::OptionsFor(root_, p), c, t);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    testing::Restored out;
    auto report = (*m)->RestoreStep(std::nullopt, testing::RequestOf(out, p));
    ASSERT_TRUE(report.ok()) << "process " << p << ": " << report.status().ToString();
    std::string log;
    for (const std::string& line : report->log) log += line + "\n";
    EXPECT_EQ(report->tier, StepChoice::Tier::kLocal) << log;
    EXPECT_EQ(report->step, want_step) << log;
    EXPECT_TRUE(testing::BitExact(out, p, want_step)) << "process " << p << "\n" << log;
    if (p == lost) {
      EXPECT_EQ(report->bytes_from_peers, 4u * 6 * 4 + 6 * 4) << log;
    }
    EXPECT_TRUE((*m)->Close().ok());
  }

  std::string Local(int host) { return root_ + "/local_" + std::to_string(host); }
  bool Committed(int host, int64_t step) {
    return fs::exists(fs::path(Local(host)) / std::to_string(step) / "commit_success.txt");
  }

  std::string root_;
};

// An observer that kills this process (SIGKILL, as a crash would) when
// process `process` reaches `point` of step `step`; `spec` is
// "<point>@<step>@<process>".
std::function<void(std::string_view, int64_t)> KillAt(const std::string& spec, int process) {
  const size_t a = spec.find('@');
  const size_t b = a == std::string::npos ? a : spec.find('@', a + 1);
  if (b == std::string::npos) return {};
  const std::string point = spec.substr(0, a);
  const int64_t step = std::atoll(spec.substr(a + 1, b - a - 1).c_str());
  if (std::atoi(spec.substr(b + 1).c_str()) != process) return {};
  return [point, step](std::string_view at, int64_t s) {
    if (at == point && s == step) ::kill(::getpid(), SIGKILL);
  };
}

// The child's job: saves steps 1..3 (only when run by SaveInChild).
TEST(EmergencyCrashChild, SaveJob) {
  const char* root = std::getenv("CAIRN_EMERGENCY_CRASH_CHILD_ROOT");
  const char* kill_at = std::getenv("CAIRN_EMERGENCY_CRASH_CHILD_AT");
  if (root == nullptr || kill_at == nullptr) GTEST_SKIP() << "run by the EmergencyCrash tests in a child process";
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    EmergencyOptions o = testing::OptionsFor(root, p);
    o.at_point = KillAt(kill_at, p);
    auto m = EmergencyCheckpointManager::Open(o, c, t);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    for (int64_t step = 1; step <= 3; ++step) {
      const testing::JobState state = testing::StateAt(step);
      auto saved = (*m)->Save(step, testing::LeavesOf(state, p));
      ASSERT_TRUE(saved.ok()) << saved.status().ToString();
    }
    Status closed = (*m)->Close();
    ASSERT_TRUE(closed.ok()) << closed.ToString();
  });
}

TEST_F(EmergencyCrash, ControlJobThatIsNotKilledKeepsEveryStepAndCopy) {
  // The manager reads no test hook from the environment: the variable that
  // once made it kill itself is set, and nothing happens.
  const int status = SaveInChild("before_step_commit@99@0", {{"CAIRN_EMERGENCY_TEST_CRASH_AT", "before_step_commit@3@1"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Own steps 2 and 3 and the copies of process 2's (retention keeps 2).
  EXPECT_EQ(Held(0), (HeldList{{0, 0, 2}, {0, 0, 3}, {1, 2, 2}, {1, 2, 3}}));
}

TEST_F(EmergencyCrash, KilledDuringALocalSaveTheStepIsNotListed) {
  const int status = SaveInChild("before_step_commit@3@0");
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_FALSE(Committed(0, 3));
  bool pending = false;
  for (const auto& e : fs::directory_iterator(Local(0))) {
    pending |= e.path().filename().string().rfind("3.orbax-checkpoint-tmp", 0) == 0;
  }
  EXPECT_TRUE(pending) << "the kill came before the save wrote anything";
  EXPECT_EQ(Held(0), (HeldList{{0, 0, 1}, {0, 0, 2}, {1, 2, 1}, {1, 2, 2}}));
  // Host 2 is lost too: hosts 0 and 2 were the only holders of rows 0..3,
  // so step 3 cannot be rebuilt; everyone restores step 2 (host 2's
  // replacement from host 0), bit-exact.
  fs::remove_all(Local(2));
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int) {
    Restore(c, t, 2, /*lost=*/2);
  });
}

TEST_F(EmergencyCrash, KilledDuringAPeerTransferTheCopyIsNotListed) {
  const int status = SaveInChild("transfer_half_received@3@1");
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  const fs::path copies = fs::path(Local(1)) / "peer_copies" / "process_3";
  EXPECT_TRUE(fs::exists(copies / "3.orbax-checkpoint-tmp-resumable")) << "the kill came before the transfer";
  EXPECT_FALSE(fs::exists(copies / "3"));
  // Process 1 receives only after its own save of step 3 is durable.
  EXPECT_TRUE(Committed(1, 3));
  for (const auto& [kind, owner, step] : Held(1)) EXPECT_FALSE(kind == 1 && step == 3) << owner;
  // Host 3 is lost: rows 4..7 of step 3 survive in host 1's own step.
  // Rows 0..3 of step 3 survive if host 0 or 2 committed it before the
  // kill (their saves run concurrently); otherwise step 2 is the newest
  // complete step.
  fs::remove_all(Local(3));
  const int64_t want = Committed(0, 3) || Committed(2, 3) ? 3 : 2;
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int) {
    Restore(c, t, want, /*lost=*/3);
  });
}

}  // namespace
}  // namespace cairn::emergency
