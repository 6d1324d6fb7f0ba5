#include "cairn/util/shared_memory_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

namespace cairn {
namespace {

std::string TestPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("cairn_shm_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(SharedMemoryFile, TwoOpeningsOfOneNameShareTheirBytes) {
  const std::string path = TestPath("share");
  auto a = SharedMemoryFile::Open(path, 3 * 4096 + 10);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = SharedMemoryFile::Open(path, 3 * 4096 + 10);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  (*a)->PopulateWrite(4096, 4096 * 2 + 10);
  (*a)->data()[3 * 4096 + 9] = 0x5a;
  (*b)->PopulateRead(0, 3 * 4096 + 10);
  EXPECT_EQ((*b)->data()[3 * 4096 + 9], 0x5a);
  (*a)->Unlink();
  EXPECT_FALSE(std::filesystem::exists(path));
  (*b)->Unlink();  // already gone: fine
  (*b)->data()[0] = 1;  // the mapping outlives the name
  EXPECT_EQ((*a)->data()[0], 1);
}

TEST(SharedMemoryFile, APrivateMappingSharesTheFilesPagesUntilWrittenAndOutlivesTheFile) {
  const std::string path = TestPath("private");
  auto a = SharedMemoryFile::Open(path, 3 * 4096);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  for (size_t i = 0; i < 3 * 4096; ++i) (*a)->data()[i] = static_cast<uint8_t>(i * 7);
  auto m = (*a)->MapPrivate(4096, 4096 + 100);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  uint8_t* view = *m;
  for (size_t i = 0; i < 4096 + 100; ++i) ASSERT_EQ(view[i], static_cast<uint8_t>((4096 + i) * 7)) << i;
  view[0] = 0xee;  // copy-on-write: the file keeps its byte
  EXPECT_EQ((*a)->data()[4096], static_cast<uint8_t>(4096 * 7));
  // Not page-aligned, or past the end: refused, naming the file.
  auto odd = (*a)->MapPrivate(100, 10);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find(path), std::string::npos) << odd.status().ToString();
  EXPECT_FALSE((*a)->MapPrivate(2 * 4096, 4096 + 1).ok());
  EXPECT_FALSE((*a)->MapPrivate(0, 0).ok());
  a->reset();  // unmapped, closed and unlinked: the private mapping stays
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(view[0], 0xee);
  EXPECT_EQ(view[4096 + 99], static_cast<uint8_t>((2 * 4096 + 99) * 7));
  ::munmap(view, SharedMemoryFile::MappedLength(4096 + 100));
}

TEST(SharedMemoryFile, AnotherSizeIsNotTheSameExchange) {
  const std::string path = TestPath("size");
  auto a = SharedMemoryFile::Open(path, 8192);
  ASSERT_TRUE(a.ok());
  auto b = SharedMemoryFile::Open(path, 4096);
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition) << b.status().ToString();
  EXPECT_NE(b.status().message().find(path), std::string::npos);
  a->reset();
  EXPECT_FALSE(std::filesystem::exists(path)) << "the destructor unlinks";
}

TEST(SharedMemoryFile, ErrorsNameThePath) {
  auto a = SharedMemoryFile::Open("/nonexistent-dir-cairn/x", 4096);
  EXPECT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("/nonexistent-dir-cairn/x"), std::string::npos);
  EXPECT_FALSE(SharedMemoryFile::Open(TestPath("zero"), 0).ok());
  EXPECT_FALSE(ThisHostId().empty());
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

// A child process running `sleep 60` (alive until killed).
pid_t StartSleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

void Touch(const std::filesystem::path& p) { std::ofstream(p) << "x"; }

// Owner sweep (shared_memory_file.h steps 1-4): files of gone owners go;
// live owners' files and fresh files that cannot be attributed stay; old
// unattributed files go.
TEST(SharedMemoryFile, TheSweepRemovesOnlyTheFilesOfGoneOwners) {
  namespace fs = std::filesystem;
  const fs::path dir = TestPath("sweep");
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A live child (its window stays until it is killed), a child that has
  // exited (its pid is free), and this process.
  const pid_t sleeper = StartSleeper();
  ASSERT_GT(sleeper, 0);
  const std::optional<uint64_t> sleeper_start = ProcessStartTicks(sleeper);
  ASSERT_TRUE(sleeper_start.has_value());
  const pid_t exited = ::fork();
  if (exited == 0) ::_exit(0);
  const std::optional<uint64_t> exited_start = ProcessStartTicks(exited);
  ASSERT_EQ(::waitpid(exited, nullptr, 0), exited);
  ProcessIdentity live_child = ThisProcess();
  live_child.pid = sleeper;
  live_child.start_ticks = *sleeper_start;
  ProcessIdentity gone = ThisProcess();
  gone.pid = exited;
  gone.start_ticks = exited_start.value_or(1);
  ProcessIdentity reused = ThisProcess();  // this pid, another start: a reused pid
  reused.start_ticks = ThisProcess().start_ticks + 1;
  ProcessIdentity elsewhere = ThisProcess();  // another pid namespace
  elsewhere.pid_ns = "pid:[1]";
  elsewhere.pid = 999999;

  const std::string mine = OwnedSharedMemoryName("cairn-restore-01", ThisProcess());
  const std::string child = OwnedSharedMemoryName("cairn-restore-02", live_child);
  const std::string dead = OwnedSharedMemoryName("cairn-restore-03", gone);
  const std::string reused_pid = OwnedSharedMemoryName("cairn-restore-04", reused);
  const std::string foreign = OwnedSharedMemoryName("cairn-restore-05", elsewhere);
  const std::string fresh_unowned = "cairn-restore-06";
  const std::string old_unowned = "cairn-restore-07";
  const std::string other_prefix = OwnedSharedMemoryName("other-08", gone);
  for (const std::string& n : {mine, child, dead, reused_pid, foreign, fresh_unowned, old_unowned, other_prefix}) {
    Touch(dir / n);
  }
  // Two days old (mtime; ctime is not settable, so the sweep of an old
  // unattributed file is checked with an age of 0 below).
  const auto two_days_ago = fs::file_time_type::clock::now() - std::chrono::hours(48);
  fs::last_write_time(dir / old_unowned, two_days_ago);

  std::vector<std::string> removed =
      RemoveAbandonedSharedMemoryFiles(dir.string(), "cairn-restore-", std::chrono::hours(24));
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{(dir / dead).string(), (dir / reused_pid).string()}));
  for (const std::string& n : {mine, child, foreign, fresh_unowned, old_unowned, other_prefix}) {
    EXPECT_TRUE(fs::exists(dir / n)) << n;
  }
  // The child dies: its window goes at the next sweep; nothing else does.
  ::kill(sleeper, SIGKILL);
  ASSERT_EQ(::waitpid(sleeper, nullptr, 0), sleeper);
  removed = RemoveAbandonedSharedMemoryFiles(dir.string(), "cairn-restore-", std::chrono::hours(24));
  EXPECT_EQ(removed, (std::vector<std::string>{(dir / child).string()}));
  // With a bound of 0 every unattributed file is old enough; live owners'
  // files still stay.
  removed = RemoveAbandonedSharedMemoryFiles(dir.string(), "cairn-restore-", std::chrono::seconds(0));
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{(dir / foreign).string(), (dir / fresh_unowned).string(),
                                               (dir / old_unowned).string()}));
  EXPECT_TRUE(fs::exists(dir / mine));
  EXPECT_TRUE(fs::exists(dir / other_prefix));
  fs::remove_all(dir);
}

TEST(SharedMemoryFile, OpeningsOfOneFileShareAnIdAndARecreatedNameDoesNot) {
  const std::string path = TestPath("file_id");
  auto a = SharedMemoryFile::Open(path, 4096);
  ASSERT_TRUE(a.ok());
  auto b = SharedMemoryFile::Open(path, 4096);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*a)->file_id(), (*b)->file_id());
  (*a)->Unlink();
  auto c = SharedMemoryFile::Open(path, 4096);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*a)->file_id(), (*c)->file_id());
}

}  // namespace
}  // namespace cairn
