// FileKvStore's durability protocol (file_kvstore.cc, safe_path.h D1-D3),
// observed through the directory-fsync hook: new directories and their
// parents are synced, an existing directory's parent once per store, and
// temporary names are random and exclusive.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/safe_path.h"
#include "cairn/kvstore/file/temp_owner.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;

std::mutex g_mu;
std::map<std::string, int>* g_syncs = nullptr;

void RecordSync(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_syncs != nullptr) ++(*g_syncs)[path];
}

// Counts directory fsyncs per path while alive.
class SyncRecorder {
 public:
  SyncRecorder() {
    std::lock_guard<std::mutex> lock(g_mu);
    g_syncs = &syncs_;
    file_internal::SetDirSyncObserverForTesting(&RecordSync);
  }
  ~SyncRecorder() {
    file_internal::SetDirSyncObserverForTesting(nullptr);
    std::lock_guard<std::mutex> lock(g_mu);
    g_syncs = nullptr;
  }
  std::map<std::string, int> Take() {
    std::lock_guard<std::mutex> lock(g_mu);
    return std::exchange(syncs_, {});
  }

 private:
  std::map<std::string, int> syncs_;
};

class Durability : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/cairn_durable_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    base_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  std::string base_;
};

TEST_F(Durability, NewRootAndKeyDirectoriesAreSyncedWithTheirParents) {
  SyncRecorder rec;
  FileKvStore store(base_ + "/new/deep/root");
  ASSERT_TRUE(store.Put("a/b/k", AsBytes("v")).ok());
  // Each created directory's parent (base_ existed), and the key's directory.
  const std::map<std::string, int> first = rec.Take();
  for (const std::string& dir : {base_, base_ + "/new", base_ + "/new/deep",
                                 base_ + "/new/deep/root", base_ + "/new/deep/root/a",
                                 base_ + "/new/deep/root/a/b"}) {
    EXPECT_EQ(first.count(dir), 1u) << dir;
  }
  // The second write below the same directories syncs only the key's
  // directory (step 5): the ancestors are known durable.
  ASSERT_TRUE(store.Put("a/b/k2", AsBytes("v")).ok());
  EXPECT_EQ(rec.Take(), (std::map<std::string, int>{{base_ + "/new/deep/root/a/b", 1}}));
}

TEST_F(Durability, ExistingDirectoriesHaveTheirParentsSyncedOncePerStore) {
  // Directories made by someone who may have died before syncing them.
  fs::create_directories(base_ + "/root/x/y");
  SyncRecorder rec;
  {
    FileKvStore store(base_ + "/root");
    ASSERT_TRUE(store.Put("x/y/k", AsBytes("v")).ok());
    EXPECT_EQ(rec.Take(), (std::map<std::string, int>{{base_, 1},
                                                      {base_ + "/root", 1},
                                                      {base_ + "/root/x", 1},
                                                      {base_ + "/root/x/y", 1}}));
    ASSERT_TRUE(store.Put("x/y/k", AsBytes("w")).ok());
    EXPECT_EQ(rec.Take(), (std::map<std::string, int>{{base_ + "/root/x/y", 1}}));
  }
  // A new store does not know: it syncs again.
  FileKvStore again(base_ + "/root");
  ASSERT_TRUE(again.Put("x/y/k", AsBytes("v")).ok());
  EXPECT_EQ(rec.Take().size(), 4u);
  // Reads sync nothing (control: the recorder sees writes).
  ASSERT_TRUE(again.Get("x/y/k").ok());
  ASSERT_TRUE(again.List("").ok());
  EXPECT_TRUE(rec.Take().empty());
}

TEST_F(Durability, StreamedWritesAndPutIfAbsentFollowTheSameProtocol) {
  SyncRecorder rec;
  FileKvStore store(base_ + "/root");
  auto writer = store.OpenWriter("s/t/k");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append(AsBytes("abc")).ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  auto synced = rec.Take();
  for (const std::string& dir : {base_, base_ + "/root", base_ + "/root/s", base_ + "/root/s/t"}) {
    EXPECT_EQ(synced.count(dir), 1u) << dir;
  }
  auto added = store.PutIfAbsent("s/u/k", AsBytes("v"));
  ASSERT_TRUE(added.ok() && *added);
  synced = rec.Take();
  EXPECT_EQ(synced.count(base_ + "/root/s"), 1u);    // parent of the new "u"
  EXPECT_EQ(synced.count(base_ + "/root/s/u"), 1u);  // after the link
  ASSERT_TRUE(store.Delete("s/u/k").ok());
  EXPECT_EQ(rec.Take(), (std::map<std::string, int>{{base_ + "/root/s/u", 1}}));
}

// Temporary names: random, 16 hex digits, created exclusively.
std::atomic<int> g_name_calls{0};
std::string CollidingThenFresh() {
  if (g_name_calls.fetch_add(1) < 2) return ".__cairn_tmp_taken";
  return ".__cairn_tmp_fresh" + std::to_string(g_name_calls.load());
}
std::string AlwaysTaken() { return ".__cairn_tmp_taken"; }

TEST_F(Durability, TemporaryNamesAreRandomAndExclusive) {
  std::set<std::string> names;
  for (int i = 0; i < 100; ++i) {
    std::string name = file_internal::NewTempName();
    // kTempMarker, 16 random hex digits, then the owner tag (temp_owner.h).
    const std::string& tag = file_internal::TempOwnerTag();
    ASSERT_EQ(name.size(), FileKvStore::kTempMarker.size() + 16 + tag.size()) << name;
    EXPECT_EQ(name.substr(FileKvStore::kTempMarker.size() + 16), tag);
    EXPECT_EQ(name.substr(FileKvStore::kTempMarker.size(), 16).find_first_not_of("0123456789abcdef"),
              std::string::npos)
        << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 100u);

  // Someone else's temporary file under the name we draw: never truncated
  // or renamed; the writer draws again.
  FileKvStore store(base_);
  std::ofstream(base_ + "/.__cairn_tmp_taken") << "another writer's bytes";
  file_internal::SetTempNameSourceForTesting(&CollidingThenFresh);
  Status s = store.Put("k", AsBytes("mine"));
  file_internal::SetTempNameSourceForTesting(nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(g_name_calls.load(), 2);
  std::ifstream in(base_ + "/.__cairn_tmp_taken");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "another writer's bytes");
  auto v = store.Get("k");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->ToString(), "mine");

  // A name source that never yields a free name: an error, not a clobber.
  file_internal::SetTempNameSourceForTesting(&AlwaysTaken);
  Status stuck = store.Put("k", AsBytes("other"));
  file_internal::SetTempNameSourceForTesting(nullptr);
  EXPECT_EQ(stuck.code(), StatusCode::kAlreadyExists) << stuck.ToString();
  EXPECT_NE(stuck.message().find(store.Describe("k")), std::string_view::npos) << stuck.ToString();
  EXPECT_NE(stuck.message().find("random names were all taken"), std::string_view::npos);
  v = store.Get("k");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->ToString(), "mine");
}

}  // namespace
}  // namespace cairn
