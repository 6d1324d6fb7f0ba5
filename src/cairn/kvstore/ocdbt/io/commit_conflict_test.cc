// Commits that race with other writers (other store objects on the same
// directory, a base without compare-and-swap, a writer that always wins) and
// commits or merges whose writes fail one by one: no acknowledged write may
// be lost, and a failed commit leaves the previous generation intact.
#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/merge.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/testing/fault_kvstore.h"

namespace cairn::ocdbt {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("cairn_ocdbt_conflict_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

using Model = std::map<std::string, std::string>;

void ExpectHolds(KvStore& store, const Model& model, const std::string& what) {
  auto list = store.List();
  ASSERT_TRUE(list.ok()) << what << ": " << list.status().ToString();
  std::vector<KeyInfo> want;
  for (const auto& [k, v] : model) want.push_back({k, v.size()});
  ASSERT_EQ(*list, want) << what;
  for (const auto& [k, v] : model) {
    auto got = store.Get(k);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    ASSERT_TRUE(got->has_value()) << what << ": key " << k << " lost";
    EXPECT_EQ((*got)->ToString(), v) << what << ": key " << k;
  }
}

std::string ValueFor(int writer, int batch, int i) {
  // Some values inline, some in data files.
  std::string v = "w" + std::to_string(writer) + "b" + std::to_string(batch) + "i" +
                  std::to_string(i);
  if (i % 2 == 0) v += std::string(200, static_cast<char>('a' + writer));
  return v;
}

// Several writers, each with its own OcdbtKvStore object (own mutex) over
// the same stored database, commit batches at the same time.
void RaceWriters(const std::vector<std::shared_ptr<OcdbtKvStore>>& stores, int batches,
                 int keys_per_batch) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (size_t w = 0; w < stores.size(); ++w) {
    threads.emplace_back([&, w] {
      for (int b = 0; b < batches; ++b) {
        std::vector<KvMutation> batch;
        for (int i = 0; i < keys_per_batch; ++i) {
          std::string key = "w" + std::to_string(w) + "/b" + std::to_string(b) + "/" +
                            std::to_string(i);
          batch.push_back({key, Buffer::CopyOf(ValueFor(static_cast<int>(w), b, i))});
        }
        Status st = stores[w]->ApplyBatch(std::move(batch));
        if (!st.ok()) {
          ++failures;
          ADD_FAILURE() << "writer " << w << " batch " << b << ": " << st.ToString();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  Model model;
  for (size_t w = 0; w < stores.size(); ++w) {
    for (int b = 0; b < batches; ++b) {
      for (int i = 0; i < keys_per_batch; ++i) {
        model["w" + std::to_string(w) + "/b" + std::to_string(b) + "/" + std::to_string(i)] =
            ValueFor(static_cast<int>(w), b, i);
      }
    }
  }
  for (size_t w = 0; w < stores.size(); ++w) {
    ExpectHolds(*stores[w], model, "store " + std::to_string(w));
  }
  auto manifest = stores[0]->ReadManifest();
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  EXPECT_EQ((*manifest)->latest_generation(), stores.size() * batches);
}

TEST(OcdbtCommitConflictTest, TwoFileStoresOnOneDirectoryLoseNoCommit) {
  fs::path dir = TempDir("two_file_stores");
  std::vector<std::shared_ptr<OcdbtKvStore>> stores;
  for (int i = 0; i < 3; ++i) {
    // Each its own FileKvStore and OcdbtKvStore, as separate `open`s are.
    stores.push_back(std::make_shared<OcdbtKvStore>(
        std::make_shared<FileKvStore>(dir.string()), OcdbtOptions{}));
  }
  RaceWriters(stores, 12, 3);
  // No lock file is left behind.
  EXPECT_FALSE(fs::exists(dir / "manifest.ocdbt.__lock"));
  fs::remove_all(dir);
}

TEST(OcdbtCommitConflictTest, StoresOverOneMemoryStoreLoseNoCommit) {
  auto base = std::make_shared<MemoryKvStore>("memory://conflict/");
  OcdbtOptions tiny;
  tiny.config.max_decoded_node_bytes = 100;  // deep trees: bigger rewrites
  std::vector<std::shared_ptr<OcdbtKvStore>> stores;
  for (int i = 0; i < 4; ++i) stores.push_back(std::make_shared<OcdbtKvStore>(base, tiny));
  RaceWriters(stores, 10, 4);
}

TEST(OcdbtCommitConflictTest, RacingPutIfAbsentHasOneWinnerAcrossStores) {
  auto base = std::make_shared<MemoryKvStore>("memory://conflict-pia/");
  std::vector<std::shared_ptr<OcdbtKvStore>> stores;
  for (int i = 0; i < 4; ++i) {
    stores.push_back(std::make_shared<OcdbtKvStore>(base, OcdbtOptions{}));
  }
  for (int round = 0; round < 5; ++round) {
    std::string key = "once" + std::to_string(round);
    std::atomic<int> wins{0};
    std::vector<std::thread> threads;
    for (size_t w = 0; w < stores.size(); ++w) {
      threads.emplace_back([&, w] {
        auto r = stores[w]->PutIfAbsent(key, AsBytes("v" + std::to_string(w)));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (*r) ++wins;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wins.load(), 1) << key;
  }
}

// A base whose CompareAndPut of the manifest reports a conflict `conflicts`
// times (as if another writer had always just committed), then passes.
class ConflictingKvStore : public PrefixKvStore {
 public:
  ConflictingKvStore(std::shared_ptr<KvStore> base, int conflicts)
      : PrefixKvStore(std::move(base), ""), conflicts_(conflicts) {}
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override {
    if (conflicts_-- > 0) return false;
    return PrefixKvStore::CompareAndPut(key, expected, value);
  }

 private:
  std::atomic<int> conflicts_;
};

// A base without compare-and-swap (the KvStore default).
class NoCasKvStore : public PrefixKvStore {
 public:
  explicit NoCasKvStore(std::shared_ptr<KvStore> base) : PrefixKvStore(std::move(base), "") {}
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override {
    return KvStore::CompareAndPut(key, expected, value);
  }
};

TEST(OcdbtCommitConflictTest, CommitRetriesAFewConflictsAndGivesUpOnEndlessOnes) {
  // Control: 5 conflicts, then the commit goes through.
  auto memory = std::make_shared<MemoryKvStore>("memory://conflicting/");
  OcdbtKvStore few(std::make_shared<ConflictingKvStore>(memory, 5), {});
  ASSERT_TRUE(few.Put("k", AsBytes("v")).ok());
  ExpectHolds(few, {{"k", "v"}}, "after 5 conflicts");
  // Endless conflicts: Unavailable, never OK, and nothing visible.
  auto memory2 = std::make_shared<MemoryKvStore>("memory://conflicting2/");
  OcdbtKvStore endless(std::make_shared<ConflictingKvStore>(memory2, 1 << 30), {});
  Status st = endless.Put("k", AsBytes("v"));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("commit attempts lost to concurrent writers"), std::string::npos)
      << st.ToString();
  EXPECT_FALSE(memory2->Get("manifest.ocdbt")->has_value());
}

TEST(OcdbtCommitConflictTest, BaseWithoutCompareAndPutRefusesToCommit) {
  auto memory = std::make_shared<MemoryKvStore>("memory://nocas/");
  OcdbtKvStore store(std::make_shared<NoCasKvStore>(memory), {});
  Status st = store.Put("k", AsBytes("v"));
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.message().find("compare-and-swap"), std::string::npos) << st.ToString();
  EXPECT_FALSE(memory->Get("manifest.ocdbt")->has_value());
  // Control: the same memory store with its own CompareAndPut commits.
  OcdbtKvStore direct(memory, {});
  ASSERT_TRUE(direct.Put("k", AsBytes("v")).ok());
  ExpectHolds(direct, {{"k", "v"}}, "direct");
}

// ---- Every write of a commit or merge fails in turn. ----------------------

Model FirstGeneration() {
  Model m;
  for (int i = 0; i < 40; ++i) {
    m["old/" + std::to_string(i)] =
        std::string(i % 3 == 0 ? 300 : 5, static_cast<char>('A' + i % 26));
  }
  return m;
}

std::vector<KvMutation> SecondBatch() {
  std::vector<KvMutation> batch;
  for (int i = 0; i < 40; ++i) {
    batch.push_back(
        {"new/" + std::to_string(i), Buffer::CopyOf(std::string(i % 2 ? 500 : 7, 'n'))});
  }
  batch.push_back({"old/0", std::nullopt});
  batch.push_back({"old/1", Buffer::CopyOf(std::string("changed"))});
  return batch;
}

OcdbtOptions SmallNodes() {
  OcdbtOptions o;
  o.config.max_decoded_node_bytes = 256;  // several nodes per level
  o.config.version_tree_arity_log2 = 1;   // version-tree nodes in data files
  o.target_data_file_size = 2000;         // several data files per commit
  return o;
}

// Fails write n (`crash`: every write from n on) of the second commit and
// checks what a fresh reader sees. Returns whether the commit succeeded.
bool CommitWithFault(uint64_t n, bool crash) {
  auto memory = std::make_shared<MemoryKvStore>("memory://fault/");
  auto fault = std::make_shared<FaultKvStore>(memory);
  OcdbtKvStore writer(fault, SmallNodes());
  Model first = FirstGeneration();
  for (int g = 0; g < 3; ++g) {  // a few generations, so the version tree has nodes
    std::vector<KvMutation> batch;
    for (const auto& [k, v] : first) batch.push_back({k, Buffer::CopyOf(v)});
    EXPECT_TRUE(writer.ApplyBatch(std::move(batch)).ok());
  }
  fault->Reset();
  Status injected = UnavailableError("disk gone");
  if (crash) {
    fault->FailWritesFrom(n, injected);
  } else {
    fault->FailNthWrite(n, injected);
  }
  Status st = writer.ApplyBatch(SecondBatch());
  const std::string what = std::string(crash ? "crash" : "fault") + " at write " +
                           std::to_string(n);
  OcdbtKvStore reader(memory, SmallNodes());
  auto manifest = reader.ReadManifest();
  EXPECT_TRUE(manifest.ok() && manifest->has_value()) << what;
  if (!st.ok()) {
    EXPECT_EQ(fault->writes_failed(), crash ? fault->writes_attempted() - n : 1) << what;
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << what << ": " << st.ToString();
    EXPECT_NE(st.message().find("disk gone"), std::string::npos) << what << ": " << st.ToString();
    EXPECT_EQ((*manifest)->latest_generation(), 3u) << what;
    ExpectHolds(reader, first, what + ", previous generation");
    // The earlier generations are intact too.
    OcdbtOptions at1 = SmallNodes();
    at1.generation = 1;
    OcdbtKvStore old(memory, at1);
    ExpectHolds(old, first, what + ", generation 1");
    return false;
  }
  EXPECT_EQ(fault->writes_failed(), 0u) << what << ": OK returned although a write failed";
  EXPECT_EQ((*manifest)->latest_generation(), 4u) << what;
  Model second = first;
  second.erase("old/0");
  second["old/1"] = "changed";
  for (int i = 0; i < 40; ++i) {
    second["new/" + std::to_string(i)] = std::string(i % 2 ? 500 : 7, 'n');
  }
  ExpectHolds(reader, second, what + ", new generation");
  return true;
}

TEST(OcdbtCommitFaultTest, EachFailedWriteOfACommitKeepsThePreviousGeneration) {
  for (bool crash : {false, true}) {
    uint64_t n = 0;
    while (!CommitWithFault(n, crash)) {
      ++n;
      ASSERT_LT(n, 200u) << "the commit never succeeded";
    }
    // Control: the commit has several writes (data files, then the manifest)
    // and succeeded once the fault was past all of them.
    EXPECT_GE(n, 3u) << (crash ? "crash" : "fault");
  }
}

bool MergeWithFault(uint64_t n) {
  auto memory = std::make_shared<MemoryKvStore>("memory://merge-fault/");
  Model root_model = {{"root/a", "1"}, {"root/b", std::string(400, 'b')}};
  {
    OcdbtKvStore root(memory, SmallNodes());
    for (const auto& [k, v] : root_model) EXPECT_TRUE(root.Put(k, AsBytes(v)).ok());
  }
  Model children;
  for (int c = 0; c < 2; ++c) {
    std::string dir = "ocdbt.process_" + std::to_string(c) + "/";
    OcdbtKvStore child(std::make_shared<PrefixKvStore>(memory, dir), SmallNodes());
    for (int i = 0; i < 30; ++i) {
      std::string key = "c" + std::to_string(c) + "/" + std::to_string(i);
      std::string value(i % 2 ? 300 : 3, static_cast<char>('0' + c));
      EXPECT_TRUE(child.Put(key, AsBytes(value)).ok());
      children[key] = value;
    }
  }
  auto fault = std::make_shared<FaultKvStore>(memory);
  fault->FailNthWrite(n, ResourceExhaustedError("no space"));
  Status st = MergeOcdbtDatabases(fault, {"ocdbt.process_0", "ocdbt.process_1"}, SmallNodes());
  const std::string what = "merge with fault at write " + std::to_string(n);
  OcdbtKvStore reader(memory, SmallNodes());
  if (!st.ok()) {
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << what << ": " << st.ToString();
    EXPECT_NE(st.message().find("no space"), std::string::npos) << what;
    ExpectHolds(reader, root_model, what + ", root before the merge");
    return false;
  }
  EXPECT_EQ(fault->writes_failed(), 0u) << what << ": OK returned although a write failed";
  Model merged = root_model;
  merged.insert(children.begin(), children.end());
  ExpectHolds(reader, merged, what + ", merged root");
  return true;
}

TEST(OcdbtCommitFaultTest, EachFailedWriteOfAMergeKeepsTheRootIntact) {
  uint64_t n = 0;
  while (!MergeWithFault(n)) {
    ++n;
    ASSERT_LT(n, 200u) << "the merge never succeeded";
  }
  EXPECT_GE(n, 2u);
}

}  // namespace
}  // namespace cairn::ocdbt
