// Tests of the Orbax layout: metadata files (parse/emit against text Orbax
// wrote), the tree model, step naming/discovery, the commit protocol, and a
// full item write/read in all four storage variants, one and three processes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/orbax_reader.h"
#include "cairn/layout/orbax/item_writer.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/py_json.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/layout/orbax/tree_metadata.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::orbax {
namespace {
namespace fs = std::filesystem;

// Written by orbax-checkpoint 0.12.8 (PyTreeCheckpointer, OCDBT + zarr3).
constexpr char kOrbaxMetadata[] =
    R"J({"tree_metadata": {"('a',)": {"key_metadata": [{"key": "a", "key_type": 2}], "value_metadata": {"value_type": "jax.Array", "skip_deserialize": false, "write_shape": [1, 8]}}, )J"
    R"J("('b', 'c.d')": {"key_metadata": [{"key": "b", "key_type": 2}, {"key": "c.d", "key_type": 2}], "value_metadata": {"value_type": "np.ndarray", "skip_deserialize": false}}, )J"
    R"J("('b', 'e')": {"key_metadata": [{"key": "b", "key_type": 2}, {"key": "e", "key_type": 2}], "value_metadata": {"value_type": "Dict", "skip_deserialize": true}}, )J"
    R"J("('b', 'l')": {"key_metadata": [{"key": "b", "key_type": 2}, {"key": "l", "key_type": 2}], "value_metadata": {"value_type": "List", "skip_deserialize": true}}, )J"
    R"J("('b', 'n')": {"key_metadata": [{"key": "b", "key_type": 2}, {"key": "n", "key_type": 2}], "value_metadata": {"value_type": "None", "skip_deserialize": true}}, )J"
    R"J("('lst', '0')": {"key_metadata": [{"key": "lst", "key_type": 2}, {"key": "0", "key_type": 1}], "value_metadata": {"value_type": "scalar", "skip_deserialize": false}}, )J"
    R"J("('lst', '1')": {"key_metadata": [{"key": "lst", "key_type": 2}, {"key": "1", "key_type": 1}], "value_metadata": {"value_type": "jax.Array", "skip_deserialize": false, "write_shape": [3]}}}, )J"
    R"J("use_ocdbt": true, "use_zarr3": true, "store_array_data_equal_to_fill_value": true, "custom_metadata": null})J";

// Test-side file helpers (the layout itself only sees KvStores).
void WriteFile(const std::string& path, const std::string& contents) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << contents;
}
bool IsFile(const std::string& path) { return fs::is_regular_file(path); }

Location Loc(const std::string& path) {
  auto loc = OpenLocation(path);
  EXPECT_TRUE(loc.ok()) << loc.status().ToString();
  return *loc;
}

std::string TempDir(const std::string& name) { return ::cairn::testing::TestDir("cairn_orbax_test", name); }

TEST(TreeMetadata, ParsesOrbaxFileAndEmitsItBack) {
  auto md = ParseTreeMetadata(kOrbaxMetadata, "_METADATA");
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  ASSERT_EQ(md->entries.size(), 7u);
  EXPECT_EQ(ParamName(md->entries[1].path), "b.c.d");
  EXPECT_EQ(md->entries[5].path[1].type, KeyType::kSequence);
  EXPECT_EQ(*md->entries[0].value.write_shape, (std::vector<int64_t>{1, 8}));
  EXPECT_TRUE(md->use_zarr3);
  EXPECT_EQ(md->use_ocdbt, std::optional<bool>(true));
  EXPECT_EQ(EmitTreeMetadata(*md), kOrbaxMetadata);
}

TEST(TreeMetadata, KeyStringsFollowPythonRepr) {
  EXPECT_EQ(KeyString({{"a", KeyType::kDict}}), "('a',)");
  EXPECT_EQ(KeyString({{"a", KeyType::kDict}, {"0", KeyType::kSequence}}), "('a', '0')");
  EXPECT_EQ(KeyString({{"it's", KeyType::kDict}}), "(\"it's\",)");
  EXPECT_EQ(KeyString({}), "()");
}

TEST(TreeMetadata, RejectsBadKeyTypesAndIndices) {
  std::string bad_type = R"J({"tree_metadata": {"x": {"key_metadata": [{"key": "a", "key_type": 3}], "value_metadata": {"value_type": "scalar"}}}})J";
  auto r = ParseTreeMetadata(bad_type, "f");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key_type 3"), std::string_view::npos);
  std::string bad_index = R"J({"tree_metadata": {"x": {"key_metadata": [{"key": "a", "key_type": 1}], "value_metadata": {"value_type": "scalar"}}}})J";
  EXPECT_FALSE(ParseTreeMetadata(bad_index, "f").ok());
  EXPECT_FALSE(ParseTreeMetadata("{}", "f").ok());
  EXPECT_FALSE(ParseTreeMetadata("[1", "f").ok());
}

TEST(TreeMetadata, BuildsTreeFromKeyMetadata) {
  auto md = ParseTreeMetadata(kOrbaxMetadata, "_METADATA");
  ASSERT_TRUE(md.ok());
  auto tree = BuildTree(*md);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  const TreeNode& root = **tree;
  ASSERT_EQ(root.kind, TreeNode::Kind::kDict);
  ASSERT_EQ(root.children.size(), 3u);
  const TreeNode& b = *root.children[1].second;
  ASSERT_EQ(b.children.size(), 4u);
  EXPECT_EQ(b.children[0].first, "c.d");
  EXPECT_EQ(b.children[1].second->kind, TreeNode::Kind::kDict);
  EXPECT_TRUE(b.children[1].second->children.empty());
  EXPECT_EQ(b.children[2].second->kind, TreeNode::Kind::kList);
  EXPECT_EQ(b.children[3].second->kind, TreeNode::Kind::kLeaf);
  const TreeNode& lst = *root.children[2].second;
  EXPECT_EQ(lst.kind, TreeNode::Kind::kList);
  EXPECT_EQ(lst.children[1].second->leaf->value.value_type, "jax.Array");
}

TEST(TreeMetadata, ListIndicesAreOrderedNumericallyAndGapsRejected) {
  TreeMetadata md;
  for (int i : {10, 2, 0, 1, 3, 4, 5, 6, 7, 8, 9}) {
    md.entries.push_back({{{"l", KeyType::kDict}, {std::to_string(i), KeyType::kSequence}}, {"scalar", false, {}}});
  }
  auto tree = BuildTree(md);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  const TreeNode& l = *(*tree)->children[0].second;
  ASSERT_EQ(l.children.size(), 11u);
  for (size_t i = 0; i < 11; ++i) EXPECT_EQ(l.children[i].first, std::to_string(i));
  md.entries.pop_back();  // drops index 9: a gap
  md.entries.erase(md.entries.begin() + 1);  // drops index 2
  EXPECT_FALSE(BuildTree(md).ok());
}

TEST(TreeMetadata, ConflictingPathsRejected) {
  TreeMetadata md;
  md.entries.push_back({{{"a", KeyType::kDict}}, {"scalar", false, {}}});
  md.entries.push_back({{{"a", KeyType::kDict}, {"b", KeyType::kDict}}, {"scalar", false, {}}});
  EXPECT_FALSE(BuildTree(md).ok());
  TreeMetadata md2;
  md2.entries.push_back({{{"a", KeyType::kDict}, {"0", KeyType::kSequence}}, {"scalar", false, {}}});
  md2.entries.push_back({{{"a", KeyType::kDict}, {"x", KeyType::kDict}}, {"scalar", false, {}}});
  EXPECT_FALSE(BuildTree(md2).ok());
}

TEST(TreeMetadata, ParamNameCollisionsReported) {
  std::vector<TreeEntry> entries = {
      {{{"a.b", KeyType::kDict}}, {"np.ndarray", false, {}}},
      {{{"a", KeyType::kDict}, {"b", KeyType::kDict}}, {"np.ndarray", false, {}}}};
  Status s = CheckParamNames(entries);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a.b"), std::string_view::npos);
  EXPECT_NE(s.message().find("('a', 'b')"), std::string_view::npos);
  entries[1].path[1].key = "c";
  EXPECT_TRUE(CheckParamNames(entries).ok());
}

TEST(PyJson, EscapesLikePython) {
  EXPECT_EQ(PyJsonString("a\"b\\"), "\"a\\\"b\\\\\"");
  EXPECT_EQ(PyJsonString("\xc3\xa9"), "\"\\u00e9\"");
  EXPECT_EQ(PyJsonString("\xf0\x9f\x98\x80"), "\"\\ud83d\\ude00\"");
  EXPECT_EQ(PyJsonDumps(Json::parse(R"J({"b": [1, null], "a": {}})J")), R"J({"a": {}, "b": [1, null]})J");
}

TEST(MetadataFiles, CheckpointMetadataRoundTripAndUnknownKeys) {
  std::string orbax = R"J({"item_handlers": {"default": "orbax.checkpoint._src.handlers.standard_checkpoint_handler.StandardCheckpointHandler"}, "metrics": {}, "performance_metrics": {}, "init_timestamp_nsecs": 1796219271185290004, "commit_timestamp_nsecs": 1796219271274231706, "custom_metadata": {}})J";
  auto md = ParseCheckpointMetadata(orbax, "_CHECKPOINT_METADATA");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(EmitCheckpointMetadata(*md), orbax);
  auto md2 = ParseCheckpointMetadata(R"J({"item_handlers": "x", "custom": 5})J", "f");
  ASSERT_TRUE(md2.ok());
  EXPECT_EQ(std::get<std::string>(md2->item_handlers), "x");
  EXPECT_EQ(md2->custom_metadata["custom"], 5);
  EXPECT_FALSE(ParseCheckpointMetadata(R"J({"item_handlers": 3})J", "f").ok());
}

TEST(MetadataFiles, ArrayMetadatasAndValidation) {
  std::string orbax = R"J({"array_metadatas": [{"array_metadata": {"param_name": "a", "write_shape": [1, 8], "chunk_shape": [1, 8], "ext_metadata": null}}, {"array_metadata": {"param_name": "key", "write_shape": [2], "chunk_shape": [2], "ext_metadata": {"random_key_impl": "threefry2x32"}}}]})J";
  auto r = ParseArrayMetadatas(orbax, "p0");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].random_key_impl, std::optional<std::string>("threefry2x32"));
  EXPECT_EQ(EmitArrayMetadatas(*r), orbax);
  auto other = *r;
  EXPECT_TRUE(ValidateArrayMetadatas({*r, other}).ok());
  other[0].chunk_shape = {2, 8};
  Status s = ValidateArrayMetadatas({*r, other});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("`a`"), std::string_view::npos);
}

TEST(MetadataFiles, ShardingFileUsesBase64Url) {
  EXPECT_EQ(Base64UrlEncode("a"), "YQ==");
  EXPECT_EQ(Base64UrlEncode("lst.1"), "bHN0LjE=");
  EXPECT_EQ(*Base64UrlDecode("a2V5"), "key");
  EXPECT_EQ(*Base64UrlDecode("_-8"), std::string("\xff\xef", 2));
  EXPECT_FALSE(Base64UrlDecode("a+b").ok());
  auto m = ParseShardingFile(R"J({"YQ==":"{\"sharding_type\": \"x\"}"})J", "_sharding");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->at("a"), "{\"sharding_type\": \"x\"}");
  EXPECT_EQ(*ParseShardingFile(EmitShardingFile(*m), "x"), *m);
}

TEST(Step, NamesAndParsing) {
  EXPECT_EQ(StepName(23, {}), "23");
  EXPECT_EQ(StepName(23, {"", 4}), "0023");
  EXPECT_EQ(StepName(23, {"step", std::nullopt}), "step_23");
  EXPECT_EQ(StepName(23, {"step", 4}), "step_0023");
  EXPECT_EQ(ParseStepName("step_0023", {"step", 4}), std::optional<int64_t>(23));
  EXPECT_EQ(ParseStepName("step_12345", {"step", 4}), std::optional<int64_t>(12345));
  EXPECT_EQ(ParseStepName("step_023", {"step", 4}), std::nullopt);
  EXPECT_EQ(ParseStepName("023", {}), std::nullopt);
  EXPECT_EQ(ParseStepName("0", {}), std::optional<int64_t>(0));
  EXPECT_EQ(ParseStepName("x_1", {"step", std::nullopt}), std::nullopt);
  EXPECT_TRUE(IsTmpName("7.orbax-checkpoint-tmp-1234"));
}

TEST(Step, DiscoveryIgnoresTmpAndUncommitted) {
  std::string root = TempDir("steps");
  for (std::string n : {"1", "2", "3.orbax-checkpoint-tmp", "5", "junk"}) fs::create_directories(root + "/" + n);
  WriteFile(root + "/1/commit_success.txt", "ok");
  WriteFile(root + "/5/commit_success.txt", "ok");
  auto all = ListSteps(Loc(root), {});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(all->back().step, 5);
  auto committed = ListSteps(Loc(root), {}, /*require_commit_file=*/true);
  ASSERT_TRUE(committed.ok());
  ASSERT_EQ(committed->size(), 2u);
  EXPECT_EQ((*committed)[0].step, 1);
  auto discovered = DiscoverSteps(Loc(root));
  ASSERT_TRUE(discovered.ok());
  EXPECT_EQ(discovered->size(), 2u);  // "2" has nothing that marks a step
  EXPECT_EQ(ListSteps(Loc(root + "/missing"), {}).status().code(), StatusCode::kNotFound);
}

TEST(Step, CommitProtocolRenamesAndMarks) {
  std::string root = TempDir("commit");
  std::string final_path = root + "/7";
  Location final_loc = Loc(root).Child("7");
  auto tmp = BeginCommit(final_loc, "abc");
  ASSERT_TRUE(tmp.ok()) << tmp.status().ToString();
  EXPECT_EQ(tmp->location.Path(), fs::canonical(root).string() + "/7.orbax-checkpoint-tmp-abc");
  ASSERT_TRUE(WriteSmallFile(tmp->location, "x", "data").ok());
  EXPECT_TRUE(ListSteps(Loc(root), {})->empty());
  ASSERT_TRUE(FinishCommit(*tmp).ok());
  EXPECT_TRUE(IsFile(final_path + "/commit_success.txt"));
  EXPECT_EQ(*ReadSmallFile(final_loc, "x"), "data");
  EXPECT_FALSE(fs::exists(tmp->location.Path()));
  EXPECT_EQ(BeginCommit(final_loc, "def").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(BeginCommit(Loc(root).Child("8"), "no-dash").status().code(), StatusCode::kInvalidArgument);
}

TEST(ItemWriter, ChunkShapeFollowsWriteShapeAndLimit) {
  EXPECT_EQ(ChooseChunkShape({4, 8}, 4, 0), (Shape{4, 8}));
  EXPECT_EQ(ChooseChunkShape({4, 8}, 4, 1 << 20), (Shape{4, 8}));
  Shape c = ChooseChunkShape({6, 8}, 4, 64);
  EXPECT_LE(c[0] * c[1] * 4, 64);
  EXPECT_EQ(6 % c[0], 0);
  EXPECT_EQ(8 % c[1], 0);
  EXPECT_EQ(ChooseChunkShape({0, 3}, 4, 0), (Shape{1, 3}));
}

struct Variant {
  bool ocdbt, zarr3;
  int processes;
};

class ItemRoundTrip : public ::testing::TestWithParam<Variant> {};

TEST_P(ItemRoundTrip, WritesAndReadsEveryLeaf) {
  const Variant v = GetParam();
  std::string dir = TempDir("item_" + std::to_string(v.ocdbt) + std::to_string(v.zarr3) + std::to_string(v.processes));
  std::vector<float> a(6 * 4);
  std::iota(a.begin(), a.end(), 1.0f);
  int32_t scalar = -7;
  // Process p writes rows [2p, 2p+2) of `a`; process 0 writes the scalar.
  auto leaves_for = [&](int p) {
    std::vector<LeafToWrite> leaves(4);
    leaves[0].path = {{"params", KeyType::kDict}, {"w 1.x", KeyType::kDict}};
    leaves[0].value_type = "jax.Array";
    leaves[0].shape = {6, 4};
    leaves[0].write_shape = {2, 4};
    for (int r = p; r < 3; r += v.processes) leaves[0].shards.push_back({Box({2 * r, 0}, {2, 4}), a.data() + 8 * r});
    leaves[0].sharding_json = R"J({"sharding_type": "SingleDeviceSharding", "device_str": "cpu:0"})J";
    leaves[1].path = {{"l", KeyType::kDict}, {"0", KeyType::kSequence}};
    leaves[1].value_type = "scalar";
    leaves[1].dtype = DType::kInt32;
    if (p == 0) leaves[1].shards.push_back({Box({}, {}), &scalar});
    leaves[2].path = {{"l", KeyType::kDict}, {"1", KeyType::kSequence}};
    leaves[2].value_type = "string";
    leaves[2].string_value = "h\xc3\xa9llo";
    leaves[3].path = {{"empty", KeyType::kDict}};
    leaves[3].value_type = "Dict";
    return leaves;
  };
  ItemWriteOptions options;
  options.use_ocdbt = v.ocdbt;
  options.use_zarr3 = v.zarr3;
  options.process_count = v.processes;
  for (int p = 0; p < v.processes; ++p) {
    options.process_index = p;
    Status s = WriteItemShards(Loc(dir), leaves_for(p), options);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  options.process_index = 0;
  ASSERT_TRUE(FinalizeItem(Loc(dir), leaves_for(0), options).ok());

  auto item = OpenItem(Loc(dir));
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  EXPECT_EQ(item->use_ocdbt, v.ocdbt);
  EXPECT_EQ(item->use_zarr3, v.zarr3);
  EXPECT_EQ(item->strings.at("l.1"), "h\xc3\xa9llo");
  EXPECT_EQ(item->array_metadatas.at("params.w 1.x").chunk_shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(item->shardings.count("params.w 1.x"), 1u);
  auto arr = OpenItemArray(*item, "params.w 1.x");
  ASSERT_TRUE(arr.ok()) << arr.status().ToString();
  EXPECT_EQ((*arr)->metadata().chunk_shape, (Shape{2, 4}));
  std::vector<float> back(24, 0.0f);
  ASSERT_TRUE((*arr)->Read(Box({0, 0}, {6, 4}), back.data()).ok());
  EXPECT_EQ(back, a);
  auto sc = OpenItemArray(*item, "l.0");
  ASSERT_TRUE(sc.ok());
  int32_t got = 0;
  ASSERT_TRUE((*sc)->Read(Box({}, {}), &got).ok());
  EXPECT_EQ(got, -7);
  EXPECT_EQ(OpenItemArray(*item, "nope").status().code(), StatusCode::kNotFound);
  if (v.ocdbt) {
    // Every process has its own database; the root refers into them.
    for (int p = 0; p < v.processes; ++p) {
      EXPECT_TRUE(IsFile(dir + "/ocdbt.process_" + std::to_string(p) + "/manifest.ocdbt"));
    }
    EXPECT_TRUE(IsFile(dir + "/manifest.ocdbt"));
  }
  auto tree = BuildTree(item->metadata);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ((*tree)->children.size(), 3u);

  // The same item through the checkpoint-format interface.
  auto reader = NewOrbaxReader(*item);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ((*reader)->arrays().size(), 2u);
  const layout::ArrayInfo* w = layout::FindArray((*reader)->arrays(), "params.w 1.x");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->tree_path, (std::vector<std::string>{"params", "w 1.x"}));
  EXPECT_EQ(w->write_shape, (Shape{2, 4}));
  std::vector<float> rows(8);
  ASSERT_TRUE((*reader)->ReadBox("params.w 1.x", Box({4, 0}, {2, 4}), rows.data()).ok());
  EXPECT_EQ(rows, std::vector<float>(a.begin() + 16, a.end()));
  EXPECT_EQ((*reader)->ReadBox("l.1", Box({}, {}), rows.data()).code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ItemRoundTrip,
                         ::testing::Values(Variant{true, true, 1}, Variant{true, false, 1},
                                           Variant{false, true, 1}, Variant{false, false, 1},
                                           Variant{true, true, 3}, Variant{true, false, 2},
                                           Variant{false, true, 2}, Variant{false, false, 3}));

TEST(ItemWriter, CollisionIsAnErrorBeforeAnythingIsWritten) {
  std::string dir = TempDir("collide");
  std::vector<float> x(2, 1.0f);
  std::vector<LeafToWrite> leaves(2);
  leaves[0].path = {{"a.b", KeyType::kDict}};
  leaves[1].path = {{"a", KeyType::kDict}, {"b", KeyType::kDict}};
  for (auto& l : leaves) {
    l.value_type = "np.ndarray";
    l.shape = {2};
    l.shards.push_back({Box({0}, {2}), x.data()});
  }
  Status s = WriteItemShards(Loc(dir), leaves, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsFile(dir + "/manifest.ocdbt"));
}

TEST(ItemStore, ResolvesRootStepAndItem) {
  std::string root = TempDir("resolve");
  for (std::string step : {"step_0001", "step_0004"}) {
    fs::create_directories(root + "/" + step + "/default");
    WriteFile(root + "/" + step + "/default/_METADATA", "{}");
    WriteFile(root + "/" + step + "/_CHECKPOINT_METADATA", "{}");
  }
  fs::create_directories(root + "/step_0009.orbax-checkpoint-tmp/default");
  const std::string real = fs::canonical(root).string();
  EXPECT_EQ(ResolveItemLocation(Loc(root))->Path(), real + "/step_0004/default");
  EXPECT_EQ(ResolveItemLocation(Loc(root + "/step_0001"))->Path(), real + "/step_0001/default");
  EXPECT_EQ(ResolveItemLocation(Loc(root + "/step_0001/default"))->Path(), real + "/step_0001/default");
  EXPECT_EQ(ResolveItemLocation(Loc(root + "/step_0001"), "other").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(OpenItem(Loc(root + "/step_0001/default")).ok());  // "{}" has no tree_metadata
}

}  // namespace
}  // namespace cairn::orbax
