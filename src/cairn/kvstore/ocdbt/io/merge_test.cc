// Tests of streaming commits (data-file rollover), GetMany, and
// MergeOcdbtDatabases.
#include "cairn/kvstore/ocdbt/io/merge.h"

#include <atomic>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/batch_read.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"

namespace cairn::ocdbt {
namespace {

namespace fs = std::filesystem;

std::string Value(size_t size, char seed) {
  std::string v(size, '\0');
  for (size_t i = 0; i < size; ++i) v[i] = static_cast<char>(seed + i * 7 + (i >> 9));
  return v;
}

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("cairn_ocdbt_" + name + "_" +
                                              std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

size_t CountDataFiles(KvStore& base, std::string_view prefix = "d/") {
  auto keys = base.List(prefix);
  EXPECT_TRUE(keys.ok());
  return keys.ok() ? keys->size() : 0;
}

Status PutMany(KvStore& store, const std::map<std::string, std::string>& kv) {
  std::vector<KvMutation> batch;
  for (const auto& [k, v] : kv) batch.push_back({k, Buffer::CopyOf(v)});
  return store.ApplyBatch(std::move(batch));
}

TEST(OcdbtStreamingTest, CommitRollsOverDataFilesAtTargetSize) {
  fs::path dir = TempDir("rollover");
  auto base = std::make_shared<FileKvStore>(dir.string());
  OcdbtOptions o;
  o.target_data_file_size = 1 << 20;  // 1 MiB files
  OcdbtKvStore store(base, o);
  std::map<std::string, std::string> kv;
  for (int i = 0; i < 10; ++i) kv["k" + std::to_string(i)] = Value(300 << 10, 'a' + i);
  kv["big"] = Value(3 << 20, 'z');  // larger than the target: a file of its own
  kv["small"] = "tiny";
  ASSERT_TRUE(PutMany(store, kv).ok());
  // 10 x 300 KiB in files of <= 1 MiB (3 per file) plus one for "big".
  EXPECT_GE(CountDataFiles(*base), 5u);
  auto files = base->List("d/");
  ASSERT_TRUE(files.ok());
  for (const auto& f : *files) {
    if (f.size > (1u << 20)) {
      EXPECT_GE(f.size, 3u << 20) << f.key;  // only the big one
    }
  }
  for (const auto& [k, v] : kv) {
    auto got = store.Get(k);
    ASSERT_TRUE(got.ok() && got->has_value()) << k;
    EXPECT_EQ((*got)->ToString(), v) << k;
  }
  fs::remove_all(dir);
}

TEST(OcdbtStreamingTest, UnalignedValuesStreamThroughFileWriter) {
  fs::path dir = TempDir("unaligned");
  auto base = std::make_shared<FileKvStore>(dir.string());
  OcdbtKvStore store(base, {});
  std::map<std::string, std::string> kv;
  for (int i = 0; i < 6; ++i) {
    kv["v" + std::to_string(i)] = Value((5 << 20) + 4097 * i + 3, static_cast<char>('A' + i));
  }
  ASSERT_TRUE(PutMany(store, kv).ok());
  EXPECT_EQ(CountDataFiles(*base), 1u);
  std::vector<std::string> keys = {"v3", "missing", "v0", "v5", "v3"};
  auto got = store.GetMany(keys);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), keys.size());
  EXPECT_FALSE((*got)[1].has_value());
  for (size_t i : {0u, 2u, 3u, 4u}) {
    ASSERT_TRUE((*got)[i].has_value()) << keys[i];
    EXPECT_EQ((*got)[i]->ToString(), kv[keys[i]]);
  }
  fs::remove_all(dir);
}

TEST(OcdbtStreamingTest, GetManyMatchesGetOverDeepTree) {
  auto base = std::make_shared<MemoryKvStore>("memory://getmany/");
  OcdbtOptions o;
  o.config.max_decoded_node_bytes = 64;  // many levels
  o.config.max_inline_value_bytes = 4;
  OcdbtKvStore store(base, o);
  std::map<std::string, std::string> kv;
  for (int i = 0; i < 300; ++i) kv["p/" + std::to_string(i * 7919 % 1000)] = Value(i % 9, 'q');
  ASSERT_TRUE(PutMany(store, kv).ok());
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; i += 3) keys.push_back("p/" + std::to_string(i));
  keys.push_back("a");
  keys.push_back("zzz");
  auto got = store.GetMany(keys);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = kv.find(keys[i]);
    ASSERT_EQ((*got)[i].has_value(), it != kv.end()) << keys[i];
    if (it != kv.end()) {
      EXPECT_EQ((*got)[i]->ToString(), it->second) << keys[i];
    }
  }
}

TEST(OcdbtStreamingTest, LookupReadsOneNodePerLevel) {
  auto base = std::make_shared<MemoryKvStore>("memory://one-node-per-level/");
  OcdbtOptions o;
  o.config.max_decoded_node_bytes = 200;
  OcdbtKvStore store(base, o);
  std::map<std::string, std::string> kv;
  for (int i = 0; i < 500; ++i) kv["key/" + std::to_string(i * 37 % 1000)] = Value(i % 50, 'r');
  ASSERT_TRUE(PutMany(store, kv).ok());
  auto manifest = store.ReadManifest();
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  const BtreeGenerationReference root = (*manifest)->versions.back();
  ASSERT_GE(root.root_height, 2);
  size_t reads = 0;
  ReadObjectFn counting = [&](const DataFileId& f, uint64_t off, uint64_t len) -> Result<Buffer> {
    ++reads;
    auto got = base->Get(f.FullPath(), ByteRange::Range(off, len));
    if (!got.ok()) return got.status();
    return std::move(**got);
  };
  for (const auto& [k, v] : kv) {
    reads = 0;
    auto found = FindKey(root, k, counting);
    ASSERT_TRUE(found.ok() && found->has_value()) << k;
    EXPECT_EQ(reads, root.root_height + 1u) << k;
  }
  reads = 0;
  std::vector<std::string> keys;
  for (const auto& [k, v] : kv) keys.push_back(k);
  size_t found = 0;
  ASSERT_TRUE(FindKeys(root, keys, counting, [&](size_t, const LeafValue* v) {
                found += v != nullptr;
                return Status::OK();
              }).ok());
  EXPECT_EQ(found, kv.size());
  // Every node of the tree exactly once: fewer reads than keys x levels.
  EXPECT_LT(reads, kv.size());
  EXPECT_GT(reads, kv.size() / 20);
}

TEST(OcdbtStreamingTest, ReadValuesCoalescesAdjacentValues) {
  auto base = std::make_shared<MemoryKvStore>("memory://coalesce/");
  std::string file_a(3 << 20, '\0'), file_b(1000, '\0');
  for (size_t i = 0; i < file_a.size(); ++i) file_a[i] = static_cast<char>(i * 13 + (i >> 12));
  for (size_t i = 0; i < file_b.size(); ++i) file_b[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(base->Put("d/a", AsBytes(file_a)).ok());
  ASSERT_TRUE(base->Put("d/b", AsBytes(file_b)).ok());
  std::vector<LeafValue> values;
  auto out_of_line = [](std::string file, uint64_t off, uint64_t len) {
    LeafValue v;
    v.is_inline = false;
    v.ref = {{"", std::move(file)}, off, len};
    return v;
  };
  for (uint64_t i = 0; i < 300; ++i) values.push_back(out_of_line("d/a", i * 10000, 9000));
  values.push_back(out_of_line("d/b", 10, 20));
  values.push_back(out_of_line("d/a", 5, 0));
  LeafValue inl;
  inl.inline_value = "inline!";
  values.push_back(inl);
  std::atomic<int> reads{0};
  ReadObjectFn counting = [&](const DataFileId& f, uint64_t off, uint64_t len) -> Result<Buffer> {
    ++reads;
    auto got = base->Get(f.FullPath(), ByteRange::Range(off, len));
    if (!got.ok()) return got.status();
    return std::move(**got);
  };
  ThreadPool pool(3);
  auto got = ReadValues(values, counting, pool);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(reads.load(), 2);  // all of d/a's values in one read (< 32 MiB), one for d/b
  for (uint64_t i = 0; i < 300; ++i) {
    EXPECT_EQ((*got)[i].ToString(), file_a.substr(i * 10000, 9000)) << i;
  }
  EXPECT_EQ((*got)[300].ToString(), file_b.substr(10, 20));
  EXPECT_EQ((*got)[301].size, 0u);
  EXPECT_EQ((*got)[302].ToString(), "inline!");
  // A reference past the end of its file is DataLoss naming the file.
  values.push_back(out_of_line("d/b", 990, 20));
  auto bad = ReadValues(values, [&](const DataFileId& f, uint64_t off, uint64_t len)
                                    -> Result<Buffer> {
    auto g = base->Get(f.FullPath(), ByteRange::Range(off, len));
    if (!g.ok()) return DataLossError("outside " + f.FullPath());
    return std::move(**g);
  }, pool);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
}

// Writes child databases `ocdbt.process_<i>/` under `base`.
void WriteChildren(std::shared_ptr<KvStore> base,
                   const std::vector<std::map<std::string, std::string>>& children,
                   const OcdbtOptions& o = {}) {
  for (size_t i = 0; i < children.size(); ++i) {
    auto child_base =
        std::make_shared<PrefixKvStore>(base, "ocdbt.process_" + std::to_string(i) + "/");
    OcdbtKvStore child(child_base, o);
    ASSERT_TRUE(PutMany(child, children[i]).ok());
  }
}

TEST(OcdbtMergeTest, RootReferencesChildDataFilesWithoutCopying) {
  fs::path dir = TempDir("merge");
  auto base = std::make_shared<FileKvStore>(dir.string());
  std::vector<std::map<std::string, std::string>> children(4);
  std::map<std::string, std::string> all;
  for (int c = 0; c < 4; ++c) {
    for (int k = 0; k < 50; ++k) {
      std::string key = "params.w" + std::to_string(k % 5) + "/c/" + std::to_string(c) + "." +
                        std::to_string(k);
      std::string v = Value(k % 3 == 0 ? 10 : 5000 + k, static_cast<char>('a' + c));
      children[c][key] = v;
      all[key] = v;
    }
  }
  WriteChildren(base, children);
  uint64_t child_bytes = 0;
  auto child_files = base->List();
  ASSERT_TRUE(child_files.ok());
  for (const auto& f : *child_files) child_bytes += f.size;

  auto found = FindProcessDatabases(*base);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 4u);
  EXPECT_EQ((*found)[0], "ocdbt.process_0/");
  ASSERT_TRUE(MergeOcdbtDatabases(base, *found).ok());

  // The root's own data files hold only nodes (+ the small inline values).
  uint64_t root_bytes = 0;
  auto root_files = base->List("d/");
  ASSERT_TRUE(root_files.ok());
  for (const auto& f : *root_files) root_bytes += f.size;
  uint64_t out_of_line = 0;
  for (const auto& [k, v] : all) out_of_line += v.size() > 100 ? v.size() : 0;
  EXPECT_LT(root_bytes, out_of_line / 10);
  EXPECT_GT(child_bytes, out_of_line);

  OcdbtKvStore root(base, {});
  auto list = root.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), all.size());
  for (const auto& [k, v] : all) {
    auto got = root.Get(k);
    ASSERT_TRUE(got.ok() && got->has_value()) << k;
    EXPECT_EQ((*got)->ToString(), v) << k;
  }
  // Leaf entries point into the children with the child's base path.
  auto manifest = root.ReadManifest();
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  EXPECT_EQ((*manifest)->latest_generation(), 1u);
  std::set<std::string> bases;
  ReadObjectFn read = [&](const DataFileId& f, uint64_t off, uint64_t len) -> Result<Buffer> {
    auto got = base->Get(f.FullPath(), ByteRange::Range(off, len));
    if (!got.ok()) return got.status();
    return std::move(**got);
  };
  ASSERT_TRUE(ListEntries((*manifest)->versions.back(), "", read,
                          [&](std::string_view, const LeafValue& v) {
                            if (!v.is_inline) bases.insert(v.ref.file_id.base_path);
                            return Status::OK();
                          })
                  .ok());
  EXPECT_EQ(bases, (std::set<std::string>{"ocdbt.process_0/", "ocdbt.process_1/",
                                          "ocdbt.process_2/", "ocdbt.process_3/"}));
  fs::remove_all(dir);
}

TEST(OcdbtMergeTest, CollisionNamesKeyAndBothChildren) {
  auto base = std::make_shared<MemoryKvStore>("memory://merge-collide/");
  WriteChildren(base, {{{"a", "1"}, {"shared/key", Value(500, 'x')}},
                       {{"b", "2"}},
                       {{"shared/key", "3"}}});
  Status st = MergeOcdbtDatabases(base, {"ocdbt.process_0", "ocdbt.process_1/",
                                         "ocdbt.process_2"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  std::string msg(st.message());
  EXPECT_NE(msg.find("shared/key"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ocdbt.process_0/"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ocdbt.process_2/"), std::string::npos) << msg;
  // Nothing was committed.
  auto m = OcdbtKvStore(base, {}).ReadManifest();
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->has_value());
}

TEST(OcdbtMergeTest, RejectsBadChildDirectories) {
  auto base = std::make_shared<MemoryKvStore>("memory://merge-bad/");
  EXPECT_EQ(MergeOcdbtDatabases(base, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MergeOcdbtDatabases(base, {"../x"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MergeOcdbtDatabases(base, {"/abs"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MergeOcdbtDatabases(base, {"a", "a/"}).code(), StatusCode::kInvalidArgument);
}

TEST(OcdbtMergeTest, NestedMergeAndCorruptChild) {
  auto base = std::make_shared<MemoryKvStore>("memory://merge-nested/");
  // A merged root one level down, merged again: base paths accumulate.
  auto mid = std::make_shared<PrefixKvStore>(base, "ocdbt.process_0/");
  WriteChildren(mid, {{{"x/1", Value(4000, 'm')}}, {{"x/2", Value(3000, 'n')}}});
  ASSERT_TRUE(MergeOcdbtDatabases(mid, {"ocdbt.process_0", "ocdbt.process_1"}).ok());
  WriteChildren(std::make_shared<PrefixKvStore>(base, "sub/"), {{{"y", Value(2000, 'o')}}});
  ASSERT_TRUE(MergeOcdbtDatabases(base, {"ocdbt.process_0", "sub/ocdbt.process_0"}).ok());
  OcdbtKvStore root(base, {});
  for (auto [k, v] : std::map<std::string, std::string>{
           {"x/1", Value(4000, 'm')}, {"x/2", Value(3000, 'n')}, {"y", Value(2000, 'o')}}) {
    auto got = root.Get(k);
    ASSERT_TRUE(got.ok() && got->has_value()) << k;
    EXPECT_EQ((*got)->ToString(), v);
  }
  // Corrupt the child's manifest: the merge fails with DataLoss naming it.
  auto child = std::make_shared<PrefixKvStore>(base, "sub/ocdbt.process_0/");
  ASSERT_TRUE(child->Put("manifest.ocdbt", AsBytes("garbage bytes here")).ok());
  Status st = MergeOcdbtDatabases(base, {"sub/ocdbt.process_0"});
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(std::string(st.message()).find("sub/ocdbt.process_0"), std::string::npos)
      << st.ToString();
}

TEST(FileKvWriterTest, StreamsAlignedAndUnalignedPiecesAndAbandons) {
  fs::path dir = TempDir("writer");
  auto base = std::make_shared<FileKvStore>(dir.string());
  std::string want;
  {
    auto w = base->OpenWriter("a/b");
    ASSERT_TRUE(w.ok());
    for (size_t piece : {size_t{5} << 20, size_t{17}, size_t{9} << 20, size_t{4096}, size_t{3}}) {
      Buffer b = Buffer::CopyOf(Value(piece, static_cast<char>(piece)));
      want += b.ToString();
      ASSERT_TRUE((*w)->Append(b.view()).ok());
    }
    EXPECT_FALSE(base->Get("a/b")->has_value());  // not visible before Commit
    ASSERT_TRUE((*w)->Commit().ok());
    EXPECT_EQ((*w)->Append(AsBytes("x")).code(), StatusCode::kFailedPrecondition);
  }
  auto got = base->Get("a/b");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->ToString(), want);
  {
    auto w = base->OpenWriter("a/c");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(AsBytes("abandoned")).ok());
  }
  EXPECT_FALSE(base->Get("a/c")->has_value());
  EXPECT_EQ(base->List()->size(), 1u);  // no temporary file left behind
  EXPECT_EQ(fs::directory_iterator(dir / "a") == fs::directory_iterator(), false);
  size_t entries = 0;
  for (auto& e : fs::directory_iterator(dir / "a")) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cairn::ocdbt
