// The crashfs shim's own model: each scenario runs in a child process (this
// binary again, with the shim preloaded), then the test checks what the
// shim numbered and injected and what a power loss leaves (Rebuild).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cairn/util/testing/temp_dir.h"
#include "crashfs_model.h"

namespace {

namespace fs = std::filesystem;
const char kData[] = "0123456789abcdefghijklmnopqrstuvwxyz";

// ---- The child's scenarios (run with the shim preloaded). ----

int WriteFile(const std::string& path, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 10;
  if (::write(fd, kData, sizeof(kData) - 1) != static_cast<ssize_t>(sizeof(kData) - 1)) return 20 + errno % 50;
  if (sync && ::fsync(fd) != 0) return 11;
  ::close(fd);
  return 0;
}

int SyncDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  int rc = fd >= 0 && ::fsync(fd) == 0 ? 0 : 12;
  if (fd >= 0) ::close(fd);
  return rc;
}

int Child(const std::string& scenario, const std::string& root) {
  const std::string tmp = root + "/a.tmp", dst = root + "/a";
  int rc = 0;
  if (scenario == "unsynced") {  // written and renamed, nothing synced
    rc = WriteFile(tmp, false);
    if (!rc && ::rename(tmp.c_str(), dst.c_str()) != 0) rc = 13;
  } else if (scenario == "synced" || scenario == "dir_unsynced") {
    rc = WriteFile(tmp, true);
    if (!rc && ::rename(tmp.c_str(), dst.c_str()) != 0) rc = 13;
    if (!rc && scenario == "synced") rc = SyncDir(root);
  } else if (scenario == "overwrite_unsynced") {  // a file of the start state rewritten
    rc = WriteFile(root + "/old", false);
  } else if (scenario == "unlink_unsynced") {
    if (::unlink((root + "/old").c_str()) != 0) rc = 14;
  } else if (scenario == "subdir_synced") {  // a new directory, synced all the way
    if (::mkdir((root + "/d").c_str(), 0755) != 0) rc = 15;
    if (!rc) rc = WriteFile(root + "/d/f", true);
    if (!rc) rc = SyncDir(root + "/d");
    if (!rc) rc = SyncDir(root);
  } else {
    rc = 99;
  }
  return rc;
}

// ---- The test's side. ----

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ChildRun {
  int status = 0;
  std::string log;
};

// Runs `scenario` in a child with the shim; `fault` as CRASHFS_FAULT.
ChildRun RunChild(const std::string& scenario, const std::string& root, const std::string& work,
             const std::string& fault = "", const std::string& shim_root = "") {
  const std::string shadow = work + "/shadow", log = work + "/log", counter = work + "/counter";
  {
    std::ofstream c(counter, std::ios::binary);
    c.write(std::string(16, '\0').data(), 16);
  }
  fs::remove(log);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::setenv("LD_PRELOAD", CRASHFS_SO, 1);
    ::setenv("CRASHFS_ROOT", (shim_root.empty() ? root : shim_root).c_str(), 1);
    ::setenv("CRASHFS_SHADOW", shadow.c_str(), 1);
    ::setenv("CRASHFS_LOG", log.c_str(), 1);
    ::setenv("CRASHFS_COUNTER", counter.c_str(), 1);
    ::setenv("CRASHFS_TRACE", "1", 1);
    ::setenv("CRASHFS_SEED", "7", 1);
    ::setenv("CRASHFS_FAULT", fault.c_str(), 1);
    ::execl("/proc/self/exe", "crashfs_test", "--child", scenario.c_str(), root.c_str(), nullptr);
    ::_exit(127);
  }
  ChildRun run;
  ::waitpid(pid, &run.status, 0);
  run.log = ReadFile(log);
  return run;
}

// The tree a power loss leaves, rebuilt at `work`/after.
std::string PowerLoss(const std::string& work) {
  std::string error;
  const std::string after = work + "/after";
  EXPECT_EQ(crashfs::Rebuild(work + "/shadow", after, &error), 0) << error;
  return after;
}

struct CrashfsTest : ::testing::Test {
  cairn::testing::TempDir work{"crashfs_test"};
  std::string root = work.path + "/root";
  void SetUp() override {
    fs::create_directory(root);
    std::ofstream(root + "/old") << "old content";
    ASSERT_EQ(crashfs::SnapshotTree(work.path + "/shadow", root), 0);
  }
};

TEST_F(CrashfsTest, UnsyncedFileRenamedVanishes) {
  ChildRun run = RunChild("unsynced", root, work.path);
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(ReadFile(root + "/a"), kData);  // before the power loss
  const std::string after = PowerLoss(work.path);
  EXPECT_FALSE(fs::exists(after + "/a"));
  EXPECT_FALSE(fs::exists(after + "/a.tmp"));
  EXPECT_EQ(ReadFile(after + "/old"), "old content");
}

TEST_F(CrashfsTest, FileAndDirectorySyncedSurvives) {
  ChildRun run = RunChild("synced", root, work.path);
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  // open, write, fsync, rename, fsync of the directory: five operations,
  // numbered at the start of their trace lines (a pid holds digits too).
  EXPECT_EQ(std::count(run.log.begin(), run.log.end(), '\n'), 5) << run.log;
  EXPECT_NE(run.log.find("\n5\t"), std::string::npos) << run.log;
  EXPECT_EQ(run.log.find("\n6\t"), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("\trename\t" + root + "/a.tmp\t" + root + "/a\n"), std::string::npos) << run.log;
  const std::string after = PowerLoss(work.path);
  EXPECT_EQ(ReadFile(after + "/a"), kData);
  EXPECT_FALSE(fs::exists(after + "/a.tmp"));
}

TEST_F(CrashfsTest, RenameWithoutDirectorySyncIsLost) {
  ChildRun run = RunChild("dir_unsynced", root, work.path);
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  const std::string after = PowerLoss(work.path);
  EXPECT_FALSE(fs::exists(after + "/a"));
  EXPECT_FALSE(fs::exists(after + "/a.tmp"));
}

TEST_F(CrashfsTest, StartStateIsDurableAndUnsyncedChangesToItAreLost) {
  ChildRun run = RunChild("overwrite_unsynced", root, work.path);
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(ReadFile(root + "/old"), kData);
  EXPECT_EQ(ReadFile(PowerLoss(work.path) + "/old"), "old content");
}

TEST_F(CrashfsTest, UnlinkWithoutDirectorySyncComesBack) {
  ChildRun run = RunChild("unlink_unsynced", root, work.path);
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_FALSE(fs::exists(root + "/old"));
  EXPECT_EQ(ReadFile(PowerLoss(work.path) + "/old"), "old content");
}

TEST_F(CrashfsTest, NewDirectorySyncedAllTheWaySurvives) {
  ChildRun run = RunChild("subdir_synced", root, work.path);
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(ReadFile(PowerLoss(work.path) + "/d/f"), kData);
}

TEST_F(CrashfsTest, TornWriteLeavesAStrictPrefixAndKills) {
  ChildRun run = RunChild("synced", root, work.path, "torn@1");  // the first write from op 1: op 2
  ASSERT_TRUE(WIFSIGNALED(run.status) && WTERMSIG(run.status) == SIGKILL) << run.status;
  EXPECT_NE(run.log.find("FAULT\ttorn\t2\t"), std::string::npos) << run.log;
  const std::string got = ReadFile(root + "/a.tmp");
  EXPECT_LT(got.size(), sizeof(kData) - 1);
  EXPECT_EQ(got, std::string(kData, got.size()));
  EXPECT_FALSE(fs::exists(root + "/a"));
}

TEST_F(CrashfsTest, KillStopsBeforeTheOperation) {
  ChildRun run = RunChild("synced", root, work.path, "kill@4");  // op 4: the rename
  ASSERT_TRUE(WIFSIGNALED(run.status) && WTERMSIG(run.status) == SIGKILL) << run.status;
  EXPECT_NE(run.log.find("FAULT\tkill\t4\t"), std::string::npos) << run.log;
  EXPECT_TRUE(fs::exists(root + "/a.tmp"));
  EXPECT_FALSE(fs::exists(root + "/a"));
  // The file was synced, its name was not: a power loss loses both names.
  EXPECT_FALSE(fs::exists(PowerLoss(work.path) + "/a.tmp"));
}

TEST_F(CrashfsTest, FailedWriteReturnsAnErrorAndTheProcessGoesOn) {
  ChildRun run = RunChild("synced", root, work.path, "fail@2");
  ASSERT_TRUE(WIFEXITED(run.status)) << run.status;
  const int code = WEXITSTATUS(run.status);
  EXPECT_TRUE(code == 20 + EIO || code == 20 + ENOSPC) << code;
  EXPECT_EQ(ReadFile(root + "/a.tmp"), "");
}

TEST_F(CrashfsTest, OperationsOutsideTheRootAreNotNumbered) {
  fs::create_directory(work.path + "/elsewhere");
  ChildRun run = RunChild("synced", root, work.path, "kill@1", work.path + "/elsewhere");
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(run.log, "");
  EXPECT_EQ(ReadFile(root + "/a"), kData);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return Child(argv[2], argv[3]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
