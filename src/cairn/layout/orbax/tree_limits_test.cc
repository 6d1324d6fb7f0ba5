// Limits on what `_METADATA` may make cairn do (docs/limits.md): key paths
// longer than kMaxKeyPathLength and JSON deeper than kMaxJsonDepth are
// InvalidArgument naming the file and entry (checked in a child process, so
// a stack overflow fails one test, not the binary); building the tree is
// linear in the number of siblings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <time.h>
#include <unistd.h>

#include "cairn/layout/orbax/item_writer.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/py_json.h"
#include "cairn/layout/orbax/tree_metadata.h"
#include "cairn/util/testing/in_subprocess.h"

namespace cairn::orbax {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

// A `_METADATA` with one entry whose key path is `length` dict keys "k".
std::string DeepKeyPathFile(size_t length) {
  std::string keys;
  for (size_t i = 0; i < length; ++i) {
    if (i > 0) keys += ", ";
    keys += R"({"key": "k", "key_type": 2})";
  }
  return R"({"tree_metadata": {"deep": {"key_metadata": [)" + keys +
         R"(], "value_metadata": {"value_type": "np.ndarray", "skip_deserialize": false}}}})";
}

AssertionResult IsInvalidWith(const Status& s, std::initializer_list<std::string> parts) {
  if (s.code() != StatusCode::kInvalidArgument) return AssertionFailure() << s.ToString();
  for (const std::string& p : parts) {
    if (s.message().find(p) == std::string_view::npos) {
      return AssertionFailure() << "no `" << p << "` in: " << s.message();
    }
  }
  return AssertionSuccess();
}

KeyPath KKeys(size_t length) { return KeyPath(length, KeyEntry{"k", KeyType::kDict}); }

TEST(TreeLimits, KeyPathAtTheLimitBuildsAndFrees) {
  auto md = ParseTreeMetadata(DeepKeyPathFile(kMaxKeyPathLength), "item/_METADATA");
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  ASSERT_EQ(md->entries[0].path.size(), kMaxKeyPathLength);
  auto tree = BuildTree(*md);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  const TreeNode* n = tree->get();
  size_t depth = 0;
  while (n->kind == TreeNode::Kind::kDict) {
    ASSERT_EQ(n->children.size(), 1u);
    n = n->children[0].second.get();
    ++depth;
  }
  EXPECT_EQ(depth, kMaxKeyPathLength);
  EXPECT_TRUE(CheckKeyPathLength(KKeys(kMaxKeyPathLength)).ok());
}

TEST(TreeLimits, KeyPathOneLongerIsRejectedByParseAndBuild) {
  auto md = ParseTreeMetadata(DeepKeyPathFile(kMaxKeyPathLength + 1), "item/_METADATA");
  EXPECT_TRUE(IsInvalidWith(md.status(), {"item/_METADATA", "entry deep", "257 keys", "256"}));
  TreeMetadata direct;
  direct.entries.push_back({KKeys(kMaxKeyPathLength + 1), {"np.ndarray", false, {}}});
  EXPECT_TRUE(IsInvalidWith(BuildTree(direct).status(),
                            {"_METADATA", "('k', 'k', 'k', 'k', ...)", "257 keys"}));
}

// Before the limit: 100,000 keys (2.8 MB of file) built a tree 100,000
// nodes deep whose destructor overflowed the stack.
TEST(TreeLimits, HundredThousandKeysFailWithoutCrashing) {
  CAIRN_EXPECT_IN_SUBPROCESS([] {
    return IsInvalidWith(ParseTreeMetadata(DeepKeyPathFile(100'000), "item/_METADATA").status(),
                         {"item/_METADATA", "100000 keys"});
  });
  CAIRN_EXPECT_IN_SUBPROCESS([] {
    TreeMetadata direct;
    direct.entries.push_back({KKeys(100'000), {"np.ndarray", false, {}}});
    return IsInvalidWith(BuildTree(direct).status(), {"100000 keys"});
  });
}

// custom_metadata is copied, emitted by PyJsonDumps and handed to Python:
// all recursive, all bounded by the parse-time depth limit.
TEST(TreeLimits, DeepCustomMetadataIsRejectedAndTheLimitRoundTrips) {
  auto file = [](size_t depth) {
    return R"({"tree_metadata": {}, "custom_metadata": )" + std::string(depth, '[') +
           std::string(depth, ']') + "}";
  };
  // Control: depth 128 in all (the file's object is one level).
  auto ok = ParseTreeMetadata(file(kMaxJsonDepth - 1), "item/_METADATA");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const std::string emitted = EmitTreeMetadata(*ok);
  EXPECT_NE(emitted.find(std::string(kMaxJsonDepth - 1, '[') + "]"), std::string::npos);
  EXPECT_TRUE(IsInvalidWith(ParseTreeMetadata(file(kMaxJsonDepth), "item/_METADATA").status(),
                            {"item/_METADATA", "nested deeper than 128"}));
  CAIRN_EXPECT_IN_SUBPROCESS([&] {
    return IsInvalidWith(ParseTreeMetadata(file(200'000), "item/_METADATA").status(),
                         {"item/_METADATA", "nested deeper than 128"});
  });
}

TEST(TreeLimits, WriterRefusesKeyPathsReadersWouldRefuse) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("cairn_tree_limits_" + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto item = OpenLocation(dir);
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  std::vector<LeafToWrite> leaves(1);
  leaves[0].path = KKeys(kMaxKeyPathLength + 1);
  leaves[0].value_type = "None";
  Status s = WriteItemShards(*item, leaves, {});
  EXPECT_TRUE(IsInvalidWith(s, {"257 keys"}));
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // refused before writing anything
  EXPECT_TRUE(IsInvalidWith(FinalizeItem(*item, leaves, {}), {"257 keys"}));
  // Control: the longest allowed path is written.
  leaves[0].path = KKeys(kMaxKeyPathLength);
  ItemWriteOptions no_ocdbt;
  no_ocdbt.use_ocdbt = false;
  EXPECT_TRUE(WriteItemShards(*item, leaves, no_ocdbt).ok());
  std::filesystem::remove_all(dir);
}

// CPU seconds (of this thread: the test machine may be busy) BuildTree
// takes for a flat dict of `n` leaves, best of three.
double FlatBuildSeconds(size_t n) {
  TreeMetadata md;
  md.entries.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    md.entries.push_back({{{"leaf_" + std::to_string(i), KeyType::kDict}}, {"np.ndarray", false, {}}});
  }
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  };
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = cpu_now();
    auto tree = BuildTree(md);
    best = std::min(best, cpu_now() - t0);
    EXPECT_TRUE(tree.ok());
    EXPECT_EQ((*tree)->children.size(), n);
  }
  return best;
}

// Before: each new sibling was looked up by scanning all earlier ones, so
// 200,000 leaves took 2e10 string compares (tens of seconds); now ~0.1 s.
// A time bound rather than a ratio of two sizes: the hash table outgrowing
// the caches makes even linear work grow faster than the leaf count.
TEST(TreeLimits, FlatDictBuildsInLinearTime) {
  const double small = FlatBuildSeconds(50'000);
  const double large = FlatBuildSeconds(200'000);
  std::printf("flat dict BuildTree CPU time: 50k leaves %.4f s, 200k leaves %.4f s\n", small, large);
  EXPECT_LT(large, 1.0);
  // Siblings keep first-seen order; a duplicate among many is still found.
  TreeMetadata md;
  for (int i = 0; i < 1000; ++i) md.entries.push_back({{{std::to_string(999 - i), KeyType::kDict}}, {"None", true, {}}});
  auto tree = BuildTree(md);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ((*tree)->children.front().first, "999");
  EXPECT_EQ((*tree)->children.back().first, "0");
  md.entries.push_back({{{"500", KeyType::kDict}}, {"None", true, {}}});
  EXPECT_TRUE(IsInvalidWith(BuildTree(md).status(), {"('500',)", "conflicts"}));
}

}  // namespace
}  // namespace cairn::orbax
