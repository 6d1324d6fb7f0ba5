// Owner tags of the file driver's temporary names, and the sweep of dead
// owners' temporaries on a store's first write below a directory
// (temp_owner.h).
#include "cairn/kvstore/file/temp_owner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/safe_path.h"
#include "cairn/util/process_identity.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::file_internal {
namespace {

namespace fs = std::filesystem;

// The tag of a process of this machine that has exited: this process's
// machine field with the pid of a reaped child.
std::string DeadOwnerTag() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::string tag = TempOwnerTag();
  const size_t p = tag.find('p');
  return tag.substr(0, p) + "p" + std::to_string(child) + "t12345";
}

TEST(TempOwner, TagsNameTheOwnerAndOnlyDeadOwnersOfThisMachineAreGone) {
  const std::string mine = std::string(kTempMarker) + "0123456789abcdef" + TempOwnerTag();
  EXPECT_FALSE(TempOwnerIsGone(mine));
  EXPECT_TRUE(TempOwnerIsGone(std::string(kTempMarker) + "0123456789abcdef" + DeadOwnerTag()));
  // Another machine's (its hash differs), an older cairn's (no tag) and a
  // malformed tag: never provably gone.
  std::string other = DeadOwnerTag();
  other[2] = other[2] == '0' ? '1' : '0';
  EXPECT_FALSE(TempOwnerIsGone(std::string(kTempMarker) + "0123456789abcdef" + other));
  EXPECT_FALSE(TempOwnerIsGone(std::string(kTempMarker) + "0123456789abcdef"));
  EXPECT_FALSE(TempOwnerIsGone(std::string(kTempMarker) + "0123456789abcdef" + DeadOwnerTag() + "x"));
}

TEST(TempOwner, TheFirstWriteBelowADirectoryRemovesDeadOwnersTemporaries) {
  cairn::testing::TempDir dir("cairn_temp_owner");
  const fs::path d = fs::path(dir.path) / "a";
  fs::create_directories(d);
  const std::string dead_file = std::string(kTempMarker) + "00000000000000aa" + DeadOwnerTag();
  const std::string dead_dir = "7" + std::string(kTempMarker) + "00000000000000bb" + DeadOwnerTag();
  const std::string live_file = std::string(kTempMarker) + "00000000000000cc" + TempOwnerTag();
  const std::string untagged = std::string(kTempMarker) + "00000000000000dd";
  for (const std::string& f : {dead_file, live_file, untagged}) std::ofstream(d / f) << "partial";
  fs::create_directories(d / dead_dir / "x");
  std::ofstream(d / dead_dir / "x" / "k") << "v";
  std::ofstream(fs::path(dir.path) / dead_file) << "partial";  // in the root

  FileKvStore store(dir.path);
  ASSERT_TRUE(store.Put("a/k", AsBytes("v")).ok());
  EXPECT_FALSE(fs::exists(d / dead_file));
  EXPECT_FALSE(fs::exists(d / dead_dir));
  EXPECT_FALSE(fs::exists(fs::path(dir.path) / dead_file));
  EXPECT_TRUE(fs::exists(d / live_file)) << "a live owner's temporary was removed";
  EXPECT_TRUE(fs::exists(d / untagged)) << "an unattributable temporary was removed";
  auto got = store.Get("a/k");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->as_string_view(), "v");
}

}  // namespace
}  // namespace cairn::file_internal
