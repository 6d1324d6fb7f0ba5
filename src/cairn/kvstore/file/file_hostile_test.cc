// FileKvStore on hostile directory trees: symbolic links inside the root
// (pointing outside it, looping), FIFOs, devices and sockets at keys, deep
// nesting. Policy in file_kvstore.h. Every must-fail case has a control case.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/util/testing/file_bytes.h"

namespace cairn {
namespace {
using ::cairn::testing::ReadFileBytes;

namespace fs = std::filesystem;

void WriteFile(const std::string& path, std::string_view data) {
  std::ofstream(path, std::ios::binary) << data;
}

// <tmp>/root (the store) and <tmp>/outside (must never be touched), with
// root/real/secret_copy, outside/secret, and root/link -> ../outside.
// The parameter: whether the openat2 fast path is on (else the walk of
// kernels before 5.6 does everything).
class HostileTree : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    openat2_was_ = file_internal::SetOpenat2ForTesting(GetParam());
    std::string pattern = "/tmp/cairn_hostile_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    base_ = pattern;
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    fs::create_directories(root_ + "/real");
    fs::create_directories(outside_);
    WriteFile(outside_ + "/secret", "outside bytes");
    WriteFile(root_ + "/real/secret", "inside bytes");
    fs::create_directory_symlink("../outside", root_ + "/link");
    store_ = std::make_unique<FileKvStore>(root_);
  }
  void TearDown() override {
    file_internal::SetOpenat2ForTesting(openat2_was_);
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  // The names in `outside_`, sorted.
  std::vector<std::string> OutsideNames() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(outside_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  void ExpectLinkError(const Status& s, std::string_view key) const {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find(store_->Describe(key)), std::string_view::npos) << s.ToString();
    EXPECT_NE(s.message().find("symbolic link"), std::string_view::npos) << s.ToString();
  }

  bool openat2_was_ = true;
  std::string base_, root_, outside_;
  std::unique_ptr<FileKvStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Openat2, HostileTree, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "openat2" : "walk"; });

TEST_P(HostileTree, RootMayBeReachedThroughALink) {
  fs::create_directory_symlink(root_, base_ + "/root_link");
  fs::create_directory_symlink(base_ + "/root_link", base_ + "/link_to_link");
  for (const std::string& path : {base_ + "/root_link", base_ + "/link_to_link/"}) {
    FileKvStore store(path);
    for (int i = 0; i < 2; ++i) {  // the second read takes the remembered path
      auto r = store.Get("real/secret");
      ASSERT_TRUE(r.ok() && r->has_value()) << path << ": " << r.status().ToString();
      EXPECT_EQ((*r)->ToString(), "inside bytes");
    }
    ASSERT_TRUE(store.Put("real/via_link", AsBytes("v")).ok()) << path;
    EXPECT_EQ(ReadFileBytes(root_ + "/real/via_link"), "v");
    auto missing = store.Get("real/none");
    ASSERT_TRUE(missing.ok());
    EXPECT_FALSE(missing->has_value());
    // Links below the root stay refused.
    auto r = store.Get("link/secret");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
    auto list = store.List("real/");
    ASSERT_TRUE(list.ok());
    EXPECT_EQ(*list, (std::vector<KeyInfo>{{"real/secret", 12}, {"real/via_link", 1}}));
    ASSERT_TRUE(store.Delete("real/via_link").ok());
  }
  EXPECT_EQ(OutsideNames(), std::vector<std::string>{"secret"});
}

TEST_P(HostileTree, GetThroughLinkedDirectoryIsRefused) {
  auto control = store_->Get("real/secret");
  ASSERT_TRUE(control.ok() && control->has_value()) << control.status().ToString();
  EXPECT_EQ((*control)->ToString(), "inside bytes");
  auto r = store_->Get("link/secret");
  ASSERT_FALSE(r.ok());
  ExpectLinkError(r.status(), "link/secret");
  std::vector<uint8_t> dst(13);
  auto into = store_->GetInto("link/secret", MutableByteView(dst.data(), dst.size()));
  ASSERT_FALSE(into.ok());
  ExpectLinkError(into.status(), "link/secret");
}

TEST_P(HostileTree, WritesThroughLinkedDirectoryAreRefused) {
  ASSERT_TRUE(store_->Put("real/new", AsBytes("v")).ok());  // control
  ExpectLinkError(store_->Put("link/new", AsBytes("v")), "link/new");
  ExpectLinkError(store_->Put("link/secret", AsBytes("overwritten")), "link/secret");
  ExpectLinkError(store_->Put("link/sub/dir/new", AsBytes("v")), "link/sub/dir/new");
  auto absent = store_->PutIfAbsent("link/new2", AsBytes("v"));
  ASSERT_FALSE(absent.ok());
  ExpectLinkError(absent.status(), "link/new2");
  auto writer = store_->OpenWriter("link/streamed");
  ASSERT_FALSE(writer.ok());
  ExpectLinkError(writer.status(), "link/streamed");
  ExpectLinkError(store_->Delete("link/secret"), "link/secret");
  EXPECT_EQ(OutsideNames(), std::vector<std::string>{"secret"});
  EXPECT_EQ(ReadFileBytes(outside_ + "/secret"), "outside bytes");
}

TEST_P(HostileTree, ListNeitherFollowsNorReportsLinks) {
  fs::create_symlink(outside_ + "/secret", root_ + "/real/file_link");
  auto list = store_->List("");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"real/secret", 12}}));
  auto under = store_->List("link/");
  ASSERT_TRUE(under.ok()) << under.status().ToString();
  EXPECT_TRUE(under->empty());
  auto partial = store_->List("li");
  ASSERT_TRUE(partial.ok());
  EXPECT_TRUE(partial->empty());
}

TEST_P(HostileTree, SymlinkLoopsDoNotFailTheListing) {
  fs::create_directory_symlink(".", root_ + "/real/self");
  fs::create_directory_symlink("..", root_ + "/real/up");
  fs::create_symlink("loop", root_ + "/loop");  // a link to itself
  auto list = store_->List("");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"real/secret", 12}}));
  auto r = store_->Get("loop");
  ASSERT_FALSE(r.ok());
  ExpectLinkError(r.status(), "loop");
  ExpectLinkError(store_->Get("real/self/secret").status(), "real/self/secret");
}

TEST_P(HostileTree, LinkAtAKeyIsNotFollowed) {
  fs::create_symlink(outside_ + "/secret", root_ + "/real/key");
  auto r = store_->Get("real/key");
  ASSERT_FALSE(r.ok());
  ExpectLinkError(r.status(), "real/key");
  // PutIfAbsent sees an entry there; Put replaces the link itself.
  auto absent = store_->PutIfAbsent("real/key", AsBytes("new"));
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(*absent);
  ASSERT_TRUE(store_->Put("real/key", AsBytes("new")).ok());
  EXPECT_FALSE(fs::is_symlink(root_ + "/real/key"));
  EXPECT_EQ(ReadFileBytes(root_ + "/real/key"), "new");
  EXPECT_EQ(ReadFileBytes(outside_ + "/secret"), "outside bytes");
  // Delete unlinks a link, never its target.
  fs::create_symlink(outside_ + "/secret", root_ + "/real/key2");
  ASSERT_TRUE(store_->Delete("real/key2").ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ + "/real/key2")));
  EXPECT_EQ(OutsideNames(), std::vector<std::string>{"secret"});
}

TEST_P(HostileTree, DeletePrefixRemovesLinksNotTheirTargets) {
  ASSERT_TRUE(store_->Put("real/x", AsBytes("1")).ok());
  fs::create_directory_symlink(outside_, root_ + "/real/inner_link");
  fs::create_symlink(outside_ + "/secret", root_ + "/real/file_link");
  ASSERT_TRUE(store_->DeletePrefix("link/").ok());  // the link itself goes
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ + "/link")));
  ASSERT_TRUE(store_->DeletePrefix("").ok());
  EXPECT_TRUE(fs::is_empty(root_));
  EXPECT_EQ(OutsideNames(), std::vector<std::string>{"secret"});
  EXPECT_EQ(ReadFileBytes(outside_ + "/secret"), "outside bytes");
  // Through a link in the prefix's directory part: nothing is a key there.
  fs::create_directory_symlink(outside_, root_ + "/link2");
  ASSERT_TRUE(store_->DeletePrefix("link2/secret").ok());
  ASSERT_TRUE(store_->DeletePrefix("link2/").ok());
  EXPECT_EQ(OutsideNames(), std::vector<std::string>{"secret"});
}

TEST(FileKvStoreTrees, DeletePrefixRemovesWholeDirectoryTrees) {
  std::string pattern = "/tmp/cairn_trees_XXXXXX";
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const std::string root = pattern;
  FileKvStore store(root);
  for (const char* key : {"x.tmp-123/a/b/c", "x.tmp-123/d", "x.tmp-1234/e", "x.tmp-12/f", "a/b",
                          "a/bc/d/e", "a/c"}) {
    ASSERT_TRUE(store.Put(key, AsBytes("v")).ok()) << key;
  }
  fs::create_directories(root + "/x.tmp-123/empty/sub");
  fs::create_directories(root + "/a/bempty");
  ::mkfifo((root + "/x.tmp-123/fifo").c_str(), 0644);
  ASSERT_TRUE(store.DeletePrefix("x.tmp-123/").ok());
  EXPECT_FALSE(fs::exists(root + "/x.tmp-123"));  // the directory itself, empty ones too
  EXPECT_TRUE(fs::exists(root + "/x.tmp-1234/e"));  // controls: other names stay
  EXPECT_TRUE(fs::exists(root + "/x.tmp-12/f"));
  ASSERT_TRUE(store.DeletePrefix("a/b").ok());
  EXPECT_FALSE(fs::exists(root + "/a/b"));
  EXPECT_FALSE(fs::exists(root + "/a/bc"));
  EXPECT_FALSE(fs::exists(root + "/a/bempty"));
  EXPECT_TRUE(fs::exists(root + "/a/c"));
  auto list = store.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"a/c", 1}, {"x.tmp-12/f", 1}, {"x.tmp-1234/e", 1}}));
  // A file named like the directory of a "dir/" prefix is not under it.
  ASSERT_TRUE(store.DeletePrefix("a/c/").ok());
  EXPECT_TRUE(fs::exists(root + "/a/c"));
  fs::remove_all(root);
}

// Runs `body` in a forked child that must exit 0 within 5 seconds (a hang is
// killed by SIGALRM, failing the test instead of blocking the suite).
#define EXPECT_PROMPT_AND_OK(body)                                                 \
  EXPECT_EXIT(                                                                     \
      {                                                                            \
        ::alarm(5);                                                                \
        bool ok_ = (body);                                                         \
        ::_exit(ok_ ? 0 : 1);                                                      \
      },                                                                           \
      ::testing::ExitedWithCode(0), "")

bool IsSpecialFileError(const Status& s, const FileKvStore& store, std::string_view key,
                        std::string_view kind) {
  const bool ok = s.code() == StatusCode::kFailedPrecondition &&
                  s.message().find(store.Describe(key)) != std::string_view::npos &&
                  s.message().find(kind) != std::string_view::npos;
  if (!ok) fprintf(stderr, "unexpected status: %s\n", s.ToString().c_str());
  return ok;
}

TEST_P(HostileTree, FifoAtAKeyFailsPromptly) {
  ASSERT_EQ(::mkfifo((root_ + "/real/fifo").c_str(), 0644), 0);
  // Control: a regular key beside it reads.
  EXPECT_PROMPT_AND_OK(store_->Get("real/secret").ok());
  EXPECT_PROMPT_AND_OK(IsSpecialFileError(store_->Get("real/fifo").status(), *store_,
                                          "real/fifo", "a FIFO"));
  EXPECT_PROMPT_AND_OK([&] {
    std::vector<uint8_t> dst(4);
    return IsSpecialFileError(
        store_->GetInto("real/fifo", MutableByteView(dst.data(), dst.size())).status(), *store_,
        "real/fifo", "a FIFO");
  }());
  auto list = store_->List("real/");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"real/secret", 12}}));
}

TEST_P(HostileTree, DeviceLinkedAtAKeyFailsPromptly) {
  fs::create_symlink("/dev/zero", root_ + "/real/zero");
  EXPECT_PROMPT_AND_OK(IsSpecialFileError(store_->Get("real/zero").status(), *store_,
                                          "real/zero", "symbolic link"));
  // A device node itself (needs CAP_MKNOD; this machine's tests run as root).
  if (::mknod((root_ + "/real/dev").c_str(), S_IFCHR | 0644, makedev(1, 5)) == 0) {
    EXPECT_PROMPT_AND_OK(IsSpecialFileError(store_->Get("real/dev").status(), *store_,
                                            "real/dev", "a character device"));
  } else {
    ADD_FAILURE() << "mknod failed: " << std::strerror(errno) << " (tests run as root here)";
  }
  // A socket.
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = root_ + "/real/sock";
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, sock_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_PROMPT_AND_OK(IsSpecialFileError(store_->Get("real/sock").status(), *store_,
                                          "real/sock", "a socket"));
  ::close(sock);
  auto list = store_->List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"real/secret", 12}}));
}

TEST(FileKvStoreDepth, KeysAndTreesDeeperThanTheLimit) {
  std::string pattern = "/tmp/cairn_depth_XXXXXX";
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const std::string root = pattern;
  FileKvStore store(root);
  std::string deep;
  for (int i = 0; i <= file_internal::kMaxDirDepth; ++i) deep += "d/";
  Status s = store.Put(deep + "k", AsBytes("v"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("directory levels"), std::string_view::npos) << s.ToString();
  ASSERT_TRUE(store.Put("d/d/d/k", AsBytes("v")).ok());  // control
  // A tree made by someone else, deeper than any valid key.
  fs::create_directories(root + "/" + deep + "d");
  auto list = store.List("");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(list.status().message().find("nested more than 256"), std::string_view::npos);
  EXPECT_NE(list.status().message().find(store.url()), std::string_view::npos);
  auto shallow = store.List("e/");  // control: other prefixes list
  ASSERT_TRUE(shallow.ok());
  Status del = store.DeletePrefix("d/");
  EXPECT_EQ(del.code(), StatusCode::kFailedPrecondition) << del.ToString();
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn
