// FileKvStore's ListChildren and prefix commit (file_commit.cc) beyond the
// conformance suite: on-disk effects, non-regular entries, symlinks.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/testing/fault_kvstore.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn {
namespace {
namespace fs = std::filesystem;
using K = ChildEntry::Kind;

// A fresh temporary directory, removed at the end.
struct TempDir : cairn::testing::TempDir {
  TempDir() : cairn::testing::TempDir("cairn_file_commit") {}
};

TEST(FileCommitTest, RenamesThePendingDirectoryWithEverythingInIt) {
  TempDir dir;
  FileKvStore store(dir.path + "/root");
  auto c = store.BeginPrefixCommit("steps/5/", "steps/5.orbax-checkpoint-tmp-x/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(fs::is_directory(dir.path + "/root/steps/5.orbax-checkpoint-tmp-x"));  // even when empty
  ASSERT_TRUE(store.Put(c->pending_prefix + "a/b", AsBytes("v")).ok());
  ASSERT_TRUE(store.FinishPrefixCommit(*c, "commit_success.txt", AsBytes("ok")).ok());
  EXPECT_FALSE(fs::exists(dir.path + "/root/steps/5.orbax-checkpoint-tmp-x"));
  EXPECT_TRUE(fs::is_regular_file(dir.path + "/root/steps/5/a/b"));
  EXPECT_TRUE(fs::is_regular_file(dir.path + "/root/steps/5/commit_success.txt"));
}

TEST(FileCommitTest, AnEmptyFinalDirectoryIsReplacedANonEmptyOneIsNot) {
  TempDir dir;
  FileKvStore store(dir.path);
  fs::create_directories(dir.path + "/empty");
  auto c = store.BeginPrefixCommit("empty/", "empty.tmp/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(store.FinishPrefixCommit(*c, "m", AsBytes("")).ok());
  EXPECT_TRUE(fs::is_regular_file(dir.path + "/empty/m"));

  ASSERT_TRUE(store.Put("full/x", AsBytes("1")).ok());
  auto full = store.BeginPrefixCommit("full/", "full.tmp/");
  EXPECT_EQ(full.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(full.status().message().find("full/"), std::string_view::npos) << full.status().ToString();
}

TEST(FileCommitTest, FinishAfterThePendingDirectoryVanishedIsNotFound) {
  TempDir dir;
  FileKvStore store(dir.path);
  auto c = store.BeginPrefixCommit("s/", "s.tmp-1/");
  ASSERT_TRUE(c.ok());
  fs::remove_all(dir.path + "/s.tmp-1");
  Status s = store.FinishPrefixCommit(*c, "m", AsBytes(""));
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("s.tmp-1"), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(fs::exists(dir.path + "/s"));
  EXPECT_FALSE(fs::exists(dir.path + "/s.tmp-1"));  // the marker did not re-create it
}

// Another process renaming or removing an entry between the directory read
// and its stat (a concurrent save's staging directory renamed into place)
// is "removed meanwhile", not an error. ListChildren left that stat's
// ENOENT in errno, and when the entry was the last one the end of the
// directory was reported as "No such file or directory" (a race of two
// saves of one step in test_concurrent_saves.py under load).
TEST(FileCommitTest, ListChildrenIgnoresAnEntryThatVanishesWhileListed) {
  TempDir dir;
  FileKvStore store(dir.path);
  ASSERT_TRUE(store.Put("keep", AsBytes("v")).ok());
  std::atomic<bool> stop{false};
  std::thread churn([&] {  // many entries, so that a listing overlaps their removal
    while (!stop.load()) {
      for (int i = 0; i < 64; ++i) ::mkdir((dir.path + "/zz-" + std::to_string(i)).c_str(), 0755);
      for (int i = 0; i < 64; ++i) ::rmdir((dir.path + "/zz-" + std::to_string(i)).c_str());
    }
  });
  int failures = 0;
  std::string first;
  for (int i = 0; i < 20000 && failures == 0; ++i) {
    auto children = store.ListChildren("");
    if (!children.ok()) {
      ++failures;
      first = children.status().ToString();
    } else if (std::none_of(children->begin(), children->end(), [](const ChildEntry& c) { return c.name == "keep"; })) {
      ++failures;
      first = "`keep` not listed";
    }
  }
  stop.store(true);
  churn.join();
  EXPECT_EQ(failures, 0) << first;
}

TEST(FileCommitTest, ListChildrenReportsSymlinksAndFifosWithoutFollowing) {
  TempDir dir;
  TempDir outside;
  FileKvStore store(dir.path);
  ASSERT_TRUE(store.Put("d/key", AsBytes("v")).ok());
  ASSERT_TRUE(store.Put("plain", AsBytes("v")).ok());
  fs::create_directory_symlink(outside.path, dir.path + "/link");
  ASSERT_EQ(::mkfifo((dir.path + "/fifo").c_str(), 0600), 0);
  auto top = store.ListChildren("");
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(*top, (std::vector<ChildEntry>{
                      {"d", K::kPrefix}, {"fifo", K::kOther}, {"link", K::kOther}, {"plain", K::kKey}}));
  auto through = store.ListChildren("link/");
  EXPECT_EQ(through.status().code(), StatusCode::kFailedPrecondition) << through.status().ToString();
  EXPECT_NE(through.status().message().find("link"), std::string_view::npos);
}

TEST(FileCommitTest, PendingThroughASymlinkIsRefused) {
  TempDir dir;
  TempDir outside;
  FileKvStore store(dir.path);
  fs::create_directory_symlink(outside.path, dir.path + "/link");
  auto c = store.BeginPrefixCommit("link/1/", "link/1.tmp/");
  EXPECT_FALSE(c.ok());
  EXPECT_FALSE(fs::exists(outside.path + "/1.tmp"));
  auto ok = store.BeginPrefixCommit("real/1/", "real/1.tmp/");  // control
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

// A fault at each step of the commit leaves the final prefix absent, and the
// step count is what fault_kvstore.h documents (begin, marker, publish).
TEST(FileCommitTest, AFaultAtEachCommitStepLeavesNothingVisible) {
  for (uint64_t step = 0; step < 4; ++step) {
    TempDir dir;
    auto base = std::make_shared<FileKvStore>(dir.path);
    FaultKvStore store(base);
    // Writes: #0 begin, #1 the data key, #2 marker, #3 publish.
    store.FailNthWrite(step, UnavailableError("injected"));
    Status st;
    auto c = store.BeginPrefixCommit("x/", "x.tmp/");
    st = c.status();
    if (st.ok()) st = store.Put(c->pending_prefix + "data", AsBytes("d"));
    if (st.ok()) st = store.FinishPrefixCommit(*c, "commit_success.txt", AsBytes("ok"));
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << "step " << step << ": " << st.ToString();
    EXPECT_FALSE(fs::exists(dir.path + "/x")) << "step " << step;
    auto children = base->ListChildren("");
    ASSERT_TRUE(children.ok());
    for (const ChildEntry& e : *children) EXPECT_NE(e.name, "x") << "step " << step;
  }
  TempDir dir;  // control: no fault
  auto base = std::make_shared<FileKvStore>(dir.path);
  FaultKvStore store(base);
  auto c = store.BeginPrefixCommit("x/", "x.tmp/");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(store.Put(c->pending_prefix + "data", AsBytes("d")).ok());
  ASSERT_TRUE(store.FinishPrefixCommit(*c, "commit_success.txt", AsBytes("ok")).ok());
  EXPECT_EQ(store.writes_attempted(), 4u);
  EXPECT_TRUE(fs::is_regular_file(dir.path + "/x/data"));
}

}  // namespace
}  // namespace cairn
