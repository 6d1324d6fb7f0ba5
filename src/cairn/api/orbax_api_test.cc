// include/cairn/orbax.h and the engine.h additions the Python package uses:
// a tree of arrays, a string and a list saved through the public types is
// opened as an item (tree, array facts, whole reads), restored from that
// item with statistics, and committed and listed by the Orbax protocol.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>

#include "cairn/engine.h"
#include "cairn/orbax.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn {
namespace {
namespace fs = std::filesystem;

std::string TempDir(const std::string& name) { return ::cairn::testing::TestDir("cairn_orbax_api_test", name); }

// {"params": {"w": float32[4, 3]}, "layers": [int32[2]], "name": "run-7"}
Status SaveTree(const std::string& dir, std::vector<float>& w, std::vector<int32_t>& l0) {
  CheckpointArray wa{{"params", "w"}, "float32", {4, 3}, {}, 1, {{{0, 0}, {4, 3}, w.data()}}};
  CheckpointArray la{{"layers", "0"}, "int32", {2}, {}, 1, {{{0}, {2}, l0.data()}}};
  la.key_kinds = {PathKeyKind::kDict, PathKeyKind::kSequence};
  CheckpointArray name;
  name.path = {"name"};
  name.value_type = "string";
  name.string_value = "run-7";
  SaveCheckpointOptions o;
  o.custom_metadata_json = R"({"run": "r1"})";
  auto single = NewSingleProcessCoordinator();
  return SaveCheckpoint(dir, {wa, la, name}, o, *single);
}

TEST(OrbaxApi, OpenItemTreeInfoAndReads) {
  const std::string root = TempDir("item");
  std::vector<float> w(12);
  std::iota(w.begin(), w.end(), 0.5f);
  std::vector<int32_t> l0{7, 8};
  ASSERT_TRUE(SaveTree(root + "/c", w, l0).ok());

  auto item = OpenCheckpointItem(root + "/c");
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  EXPECT_EQ((*item)->dir(), root + "/c");
  EXPECT_TRUE((*item)->use_ocdbt());
  EXPECT_EQ((*item)->variant(), "ocdbt+zarr3");
  EXPECT_EQ((*item)->custom_metadata_json(), R"({"run":"r1"})");

  auto tree = (*item)->Tree();
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  ASSERT_EQ((*tree)->kind, ItemTreeNode::Kind::kDict);
  std::map<std::string, const ItemTreeNode*> top;
  for (const auto& [k, v] : (*tree)->children) top[k] = v.get();
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top["name"]->leaf_kind, "string");
  EXPECT_EQ(top["name"]->string_value, "run-7");
  ASSERT_EQ(top["layers"]->kind, ItemTreeNode::Kind::kList);
  EXPECT_EQ(top["layers"]->children[0].second->param, "layers.0");
  const ItemTreeNode& wn = *top["params"]->children[0].second;
  EXPECT_EQ(wn.leaf_kind, "array");
  EXPECT_EQ(wn.param, "params.w");
  EXPECT_EQ(wn.value_type, "jax.Array");

  auto info = (*item)->ArrayInfo({"params.w", "layers.0"});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ((*info)[0].dtype, "float32");
  EXPECT_EQ((*info)[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ((*info)[1].dtype, "int32");
  auto missing = (*item)->ArrayInfo({"params.nope"});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("params.nope"), std::string::npos) << missing.status().ToString();

  std::vector<float> got(12, -1);
  ASSERT_TRUE((*item)->ReadArrays({{"params.w", got.data(), {4, 3}, 4}}).ok());
  EXPECT_EQ(got, w);
  Status wrong = (*item)->ReadArrays({{"params.w", got.data(), {3, 4}, 4}});
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("output buffer for `params.w` does not match the stored array"), std::string::npos)
      << wrong.ToString();

  // A restore from the opened item, by param, into strided destinations.
  std::vector<float> column(4, -1);  // column 1 of w
  std::vector<float> wide(24, -1);      // w into the left half of a 4x6 buffer
  RestoreArray ra;
  ra.param = "params.w";
  ra.boxes = {{{0, 1}, {4, 1}, column.data()}, {{0, 0}, {4, 3}, wide.data(), {24, 4}}};
  RestoreOptions ro;
  ro.item = *item;
  auto stats = RestoreCheckpoint("(named only)", {ra}, ro);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(column, (std::vector<float>{w[1], w[4], w[7], w[10]}));
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) EXPECT_EQ(wide[r * 6 + c], c < 3 ? w[r * 3 + c] : -1.0f) << r << "," << c;
  }
  EXPECT_GE(stats->chunks_read, 1);
  fs::remove_all(root);
}

TEST(OrbaxApi, MissingStringIsNamed) {
  const std::string root = TempDir("strings");
  std::vector<float> w(12);
  std::vector<int32_t> l0{1, 2};
  ASSERT_TRUE(SaveTree(root + "/c", w, l0).ok());
  fs::remove(root + "/c/_strings.json");
  auto item = OpenCheckpointItem(root + "/c");
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  auto tree = (*item)->Tree();
  EXPECT_EQ(tree.status().code(), StatusCode::kNotFound);
  EXPECT_NE(tree.status().message().find("string `name` missing from _strings.json of " + root + "/c"),
            std::string::npos)
      << tree.status().ToString();
  fs::remove_all(root);
}

TEST(OrbaxApi, CommitProtocolMetadataAndSteps) {
  const std::string root = TempDir("commit");
  auto begun = BeginOrbaxCommit(root + "/7", "s1");
  ASSERT_TRUE(begun.ok()) << begun.status().ToString();
  EXPECT_EQ(begun->save_id, "s1");
  EXPECT_TRUE(fs::is_directory(begun->path));
  EXPECT_EQ(OrbaxPendingPath(root + "/7", "s1").value(), begun->path);
  auto found = FindOrbaxPendingCommit(root + "/7");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->path, begun->path);
  ASSERT_TRUE(WriteOrbaxCheckpointMetadata(begun->path, "h", {"default"}, 5, "null").ok());
  Status bad = WriteOrbaxCheckpointMetadata(begun->path, "h", {}, 5, "{nope");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("custom_metadata"), std::string::npos) << bad.ToString();
  auto none = ListOrbaxSteps(root);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());  // not finished: not a step
  ASSERT_TRUE(FinishOrbaxCommit(root + "/7", "s1").ok());
  EXPECT_TRUE(fs::exists(root + "/7/_CHECKPOINT_METADATA"));
  auto steps = ListOrbaxSteps(root);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0].step, 7);
  EXPECT_EQ((*steps)[0].path, root + "/7");
  EXPECT_EQ(BeginOrbaxCommit(root + "/7").status().code(), StatusCode::kAlreadyExists);

  auto again = BeginOrbaxCommit(root + "/8");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->save_id.empty());
  AbandonOrbaxCommit(root + "/8", again->save_id);
  EXPECT_FALSE(fs::exists(again->path));

  EXPECT_EQ(OrbaxStepName(23, "ckpt", 5), "ckpt_00023");
  EXPECT_EQ(OrbaxStepName(23, "", std::nullopt), "23");
  EXPECT_GT(OrbaxNowNanos(), 0);
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn
