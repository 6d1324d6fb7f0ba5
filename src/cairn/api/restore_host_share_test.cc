// Processes of one host restoring onto another sharding decode each shared
// compressed chunk once (restore_host_share.h): threads of this test stand
// in for the processes, a ThreadGroup for their coordinator.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "cairn/engine.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/restore_host_share.h"
#include "cairn/engine/save.h"
#include "cairn/engine/testing/save_helpers.h"
#include "cairn/engine/testing/thread_coordinator.h"

namespace cairn::engine {
namespace {
namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the save helpers

constexpr Index kRows = 512, kCols = 256, kChunkRows = 64;  // 8 chunks of 64 KiB
constexpr int kProcesses = 4;
constexpr Index kColsEach = kCols / kProcesses;

struct Saved {
  std::string dir;
  std::vector<float> w;
};

// A checkpoint saved by rows (chunks of kChunkRows whole rows), zstd.
Saved SaveByRows(const std::string& name) {
  Saved s{TempDir(name) + "/item", Iota(static_cast<size_t>(kRows * kCols), 0.25f)};
  for (size_t i = 0; i < s.w.size(); i += 7) s.w[i] = -s.w[i];
  SaveRowChunks(s.dir, s.w, kRows, kCols, kChunkRows);
  return s;
}

// The observer every restore of RestoreByColumns passes (the killed
// child's kills its process).
std::function<void(std::string_view)> at_point_of_restores;

struct Outcome {
  Status status;
  RestoreStats stats;
  std::vector<float> got;  // this process's columns, all rows
};

// Process i restores columns [i * kColsEach, (i + 1) * kColsEach) of every
// row: a part of every stored chunk. `box_of(i)` may change that.
std::vector<Outcome> RestoreByColumns(const Saved& s, ThreadGroup* group, const std::string& shm,
                                      std::function<Box(int)> box_of = nullptr,
                                      uint64_t max_bytes = uint64_t{1} << 30, int participants = kProcesses,
                                      Coordinator::Duration timeout = std::chrono::seconds(60)) {
  std::vector<Outcome> out(static_cast<size_t>(participants));
  std::vector<std::thread> threads;
  for (int i = 0; i < participants; ++i) {
    threads.emplace_back([&, i] {
      Outcome& o = out[static_cast<size_t>(i)];
      o.got.assign(static_cast<size_t>(kRows * kColsEach), -1.0f);
      RestoreRequest q;
      q.directory = s.dir;
      ArrayToRestore a;
      a.param = "params.w";
      Box box = box_of ? box_of(i) : Box({0, i * kColsEach}, {kRows, kColsEach});
      a.boxes.push_back({box, o.got.data(), {}});
      q.arrays = {a};
      if (group != nullptr) q.coordinator = &group->Member(i);
      q.host_share.directory = shm;
      q.host_share.max_bytes = max_bytes;
      q.host_share.timeout = timeout;
      q.host_share.at_point = at_point_of_restores;
      q.stats = &o.stats;
      o.status = Restore(q);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void ExpectColumns(const Saved& s, const Outcome& o, int i) {
  ASSERT_TRUE(o.status.ok()) << "process " << i << ": " << o.status.ToString();
  for (Index r = 0; r < kRows; ++r) {
    for (Index c = 0; c < kColsEach; ++c) {
      ASSERT_EQ(o.got[static_cast<size_t>(r * kColsEach + c)],
                s.w[static_cast<size_t>(r * kCols + i * kColsEach + c)])
          << "process " << i << " row " << r << " column " << c;
    }
  }
}

TEST(RestoreHostShare, EachSharedChunkIsDecodedOnceOnTheHost) {
  const Saved s = SaveByRows("host_share_once");
  const std::string shm = TempDir("host_share_once_shm");
  ThreadGroup group(kProcesses);
  std::vector<Outcome> out = RestoreByColumns(s, &group, shm);
  int64_t decoded = 0;
  for (int i = 0; i < kProcesses; ++i) {
    const Outcome& o = out[static_cast<size_t>(i)];
    ExpectColumns(s, o, i);
    // 8 chunks over 4 processes: each decodes 2 for the host, copies 6.
    EXPECT_EQ(o.stats.chunks_decoded_for_host, 2) << "process " << i;
    EXPECT_EQ(o.stats.chunks_from_host, 6) << "process " << i;
    EXPECT_EQ(o.stats.chunks_read, 0) << "process " << i;
    EXPECT_EQ(o.stats.host_share_rounds, 1) << "process " << i;
    EXPECT_EQ(o.stats.chunks_fallen_back, 0) << "process " << i;
    decoded += o.stats.chunks_decoded_for_host;
  }
  EXPECT_EQ(decoded, kRows / kChunkRows);
  EXPECT_EQ(FilesIn(shm), 0u) << "the shared file's name outlived the restore";
}

TEST(RestoreHostShare, AWindowSmallerThanTheSharedChunksIsReusedRoundAfterRound) {
  const Saved s = SaveByRows("host_share_rounds");
  const std::string shm = TempDir("host_share_rounds_shm");
  ThreadGroup group(kProcesses);
  // Room for 3 chunks of 64 KiB: 8 chunks in 3 rounds (3, 3, 2).
  std::vector<Outcome> out = RestoreByColumns(s, &group, shm, nullptr, 3 * (64 << 10) + 100);
  int64_t decoded = 0;
  for (int i = 0; i < kProcesses; ++i) {
    const Outcome& o = out[static_cast<size_t>(i)];
    ExpectColumns(s, o, i);
    EXPECT_EQ(o.stats.host_share_rounds, 3) << "process " << i;
    EXPECT_EQ(o.stats.chunks_decoded_for_host + o.stats.chunks_from_host, 8) << "process " << i;
    EXPECT_EQ(o.stats.chunks_read, 0) << "process " << i;
    decoded += o.stats.chunks_decoded_for_host;
  }
  EXPECT_EQ(decoded, kRows / kChunkRows);
  EXPECT_EQ(FilesIn(shm), 0u);
}

TEST(RestoreHostShare, AProcessThatNeverComesOnlyCostsTheOthersTheTimeout) {
  const Saved s = SaveByRows("host_share_missing");
  const std::string shm = TempDir("host_share_missing_shm");
  ThreadGroup group(kProcesses);
  // Processes 0-2 restore; process 3 of the coordinator never does.
  std::vector<Outcome> out =
      RestoreByColumns(s, &group, shm, nullptr, uint64_t{1} << 30, kProcesses - 1, std::chrono::milliseconds(300));
  for (int i = 0; i < kProcesses - 1; ++i) {
    ExpectColumns(s, out[static_cast<size_t>(i)], i);
    EXPECT_EQ(out[static_cast<size_t>(i)].stats.chunks_read, kRows / kChunkRows) << "process " << i;
  }
  EXPECT_EQ(FilesIn(shm), 0u);
}

TEST(RestoreHostShare, WithoutACoordinatorEveryProcessDecodesEveryChunk) {
  const Saved s = SaveByRows("host_share_alone");
  std::vector<Outcome> out = RestoreByColumns(s, nullptr, "/dev/shm");
  for (int i = 0; i < kProcesses; ++i) {
    ExpectColumns(s, out[static_cast<size_t>(i)], i);
    EXPECT_EQ(out[static_cast<size_t>(i)].stats.chunks_read, kRows / kChunkRows);
    EXPECT_EQ(out[static_cast<size_t>(i)].stats.chunks_from_host, 0);
  }
}

TEST(RestoreHostShare, AProcessThatCannotOpenTheFileLeavesItsChunksToTheOthers) {
  const Saved s = SaveByRows("host_share_open_fails");
  const std::string shm = TempDir("host_share_open_fails_shm");
  ThreadGroup group(kProcesses);
  SetHostShareOpenFailureForTesting(1);
  std::vector<Outcome> out = RestoreByColumns(s, &group, shm);
  SetHostShareOpenFailureForTesting(-1);
  for (int i = 0; i < kProcesses; ++i) ExpectColumns(s, out[static_cast<size_t>(i)], i);
  // Process 1 decodes everything itself (its own 2 as its own, the others'
  // 6 after step 6); every other process decodes process 1's 2 itself.
  EXPECT_EQ(out[1].stats.chunks_decoded_for_host, 0);
  EXPECT_EQ(out[1].stats.chunks_from_host, 0);
  EXPECT_EQ(out[1].stats.chunks_fallen_back, 6);
  EXPECT_EQ(out[1].stats.chunks_read, 8);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(out[static_cast<size_t>(i)].stats.chunks_decoded_for_host, 2) << "process " << i;
    EXPECT_EQ(out[static_cast<size_t>(i)].stats.chunks_fallen_back, 2) << "process " << i;
    EXPECT_EQ(out[static_cast<size_t>(i)].stats.chunks_from_host, 4) << "process " << i;
    EXPECT_EQ(out[static_cast<size_t>(i)].stats.chunks_read, 2) << "process " << i;
  }
  EXPECT_EQ(FilesIn(shm), 0u);
}

TEST(RestoreHostShare, AProcessWhosePlanFailsDoesNotHoldUpTheOthers) {
  const Saved s = SaveByRows("host_share_plan_fails");
  const std::string shm = TempDir("host_share_plan_fails_shm");
  ThreadGroup group(kProcesses);
  std::vector<Outcome> out = RestoreByColumns(s, &group, shm, [](int i) {
    // Process 3 asks for a box outside the array.
    return i == 3 ? Box({0, kCols}, {kRows, kColsEach}) : Box({0, i * kColsEach}, {kRows, kColsEach});
  });
  EXPECT_EQ(out[3].status.code(), StatusCode::kInvalidArgument) << out[3].status.ToString();
  EXPECT_NE(out[3].status.message().find("params.w"), std::string::npos) << out[3].status.ToString();
  int64_t decoded = 0;
  for (int i = 0; i < 3; ++i) {
    ExpectColumns(s, out[static_cast<size_t>(i)], i);
    decoded += out[static_cast<size_t>(i)].stats.chunks_decoded_for_host;
    EXPECT_GT(out[static_cast<size_t>(i)].stats.chunks_from_host, 0) << "process " << i;
  }
  EXPECT_EQ(decoded, kRows / kChunkRows);
}

TEST(RestoreHostShare, ACorruptSharedChunkFailsEveryProcessThatNeedsItNamingIt) {
  Saved s = SaveByRows("host_share_corrupt");
  // Garble the middle of the OCDBT data files: some chunk's zstd frame.
  size_t garbled = 0;
  for (const auto& e : fs::recursive_directory_iterator(s.dir)) {
    if (!e.is_regular_file() || e.path().parent_path().filename() != "d") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::streamoff>(e.file_size());
    for (std::streamoff at = size / 3; at < size / 3 + 64 && at < size; ++at) {
      f.seekp(at);
      f.put(static_cast<char>(0x5a));
      ++garbled;
    }
  }
  ASSERT_GT(garbled, 0u);
  const std::string shm = TempDir("host_share_corrupt_shm");
  ThreadGroup group(kProcesses);
  std::vector<Outcome> out = RestoreByColumns(s, &group, shm);
  for (int i = 0; i < kProcesses; ++i) {
    const Status& st = out[static_cast<size_t>(i)].status;
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << "process " << i << ": " << st.ToString();
    EXPECT_NE(st.message().find("params.w"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(FilesIn(shm), 0u);
}

TEST(RestoreHostShare, ThePublicApiRestoresTogetherWithACoordinator) {
  const Saved s = SaveByRows("host_share_public");
  ThreadGroup group(kProcesses);
  std::vector<Outcome> out(kProcesses);
  std::vector<std::thread> threads;
  for (int i = 0; i < kProcesses; ++i) {
    threads.emplace_back([&, i] {
      Outcome& o = out[static_cast<size_t>(i)];
      o.got.assign(static_cast<size_t>(kRows * kColsEach), -1.0f);
      RestoreArray a;
      a.path = {"params", "w"};
      a.boxes.push_back({{0, i * kColsEach}, {kRows, kColsEach}, o.got.data()});
      o.status = RestoreCheckpoint(s.dir, {a}, &group.Member(i));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kProcesses; ++i) ExpectColumns(s, out[static_cast<size_t>(i)], i);
}

// The killed restore of the test below (only when run by it): 4 threads
// restore by columns with their window in $CAIRN_HOST_SHARE_CHILD_SHM, and
// the process is killed (SIGKILL, as the OOM killer or a preemption would)
// as soon as the window is open.
TEST(RestoreHostShareChild, KilledWithTheWindowOpen) {
  const char* item = std::getenv("CAIRN_HOST_SHARE_CHILD_ITEM");
  const char* shm = std::getenv("CAIRN_HOST_SHARE_CHILD_SHM");
  if (item == nullptr || shm == nullptr) GTEST_SKIP() << "run by RestoreHostShare.AKilledRestoresWindow... in a child";
  at_point_of_restores = [](std::string_view point) {
    if (point == kPointWindowOpened) ::kill(::getpid(), SIGKILL);
  };
  ThreadGroup group(kProcesses);
  RestoreByColumns(Saved{item, {}}, &group, shm);
  ADD_FAILURE() << "the restore never opened its window";
}

std::vector<std::string> WindowsIn(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(kWindowPrefix)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A restore killed with its window open leaves the window (up to 512 MiB of
// the host's memory); the next restore on the host removes it, and never a
// live owner's window.
TEST(RestoreHostShare, AKilledRestoresWindowIsRemovedByTheNextRestoreAndALiveOwnersIsNot) {
  const Saved s = SaveByRows("host_share_killed");
  const std::string shm = TempDir("host_share_killed_shm");
  // A window of a restore in progress in this (live) process.
  const std::string live = OwnedSharedMemoryName(std::string(kWindowPrefix) + "00000000000000aa", ThisProcess());
  std::ofstream(shm + "/" + live) << "x";
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("CAIRN_HOST_SHARE_CHILD_ITEM", s.dir.c_str(), 1);
    ::setenv("CAIRN_HOST_SHARE_CHILD_SHM", shm.c_str(), 1);
    ::execl(exe.c_str(), exe.c_str(), "--gtest_filter=RestoreHostShareChild.KilledWithTheWindowOpen",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  std::vector<std::string> left = WindowsIn(shm);
  ASSERT_EQ(left.size(), 2u) << "the killed restore left no window";
  const std::string killed = left[0] == live ? left[1] : left[0];
  EXPECT_NE(killed.find(".owner-" + std::to_string(pid) + "-"), std::string::npos) << killed;
  // The window of all 8 chunks (one round), 512 KiB of memory.
  EXPECT_EQ(fs::file_size(shm + "/" + killed), static_cast<uintmax_t>(kRows * kCols * 4)) << killed;
  // The next restore on the host: bit-exact, and only the live window is left.
  ThreadGroup group(kProcesses);
  std::vector<Outcome> out = RestoreByColumns(s, &group, shm);
  for (int i = 0; i < kProcesses; ++i) ExpectColumns(s, out[static_cast<size_t>(i)], i);
  EXPECT_EQ(WindowsIn(shm), (std::vector<std::string>{live}));
}

}  // namespace
}  // namespace cairn::engine
