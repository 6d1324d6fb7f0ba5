// A leaf's sharding given as facts (SaveLeaf::sharding): the engine writes
// `_sharding` in Orbax's form (layout/orbax/sharding.h) and fails the save
// on facts that disagree (checked when the save is planned).
#include <gtest/gtest.h>

#include <filesystem>

#include "cairn/engine/save.h"
#include "cairn/engine/testing/save_helpers.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/metadata_files.h"

namespace cairn::engine {
namespace {

using namespace testing;  // NOLINT: the save helpers

orbax::ShardingMetadata Mesh2() {
  orbax::ShardingMetadata s;
  s.mesh_shape = {2};
  s.axis_names = {"data"};
  s.partition_spec = {{orbax::PartitionSpecEntry::Kind::kAxis, {"data"}},
                      {orbax::PartitionSpecEntry::Kind::kNone, {}}};
  s.device_ids = {1, 0};
  return s;
}

TEST(SaveSharding, FactsAreWrittenInOrbaxsForm) {
  const std::string dir = TempDir("sharding_facts") + "/item";
  std::vector<float> w = Iota(24);
  SaveRequest r;
  r.directory = dir;
  SaveLeaf l = ArrayLeaf("w", {4, 6}, {2, 6});
  l.shards = {Shard(w, {4, 6}, Box({0, 0}, {4, 6}))};
  l.sharding = Mesh2();
  l.sharding_json = "not used: the facts win";
  r.leaves = {l};
  auto coordinator = NewSingleProcessCoordinator();
  Status s = Save(r, *coordinator);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto text = orbax::ReadSmallFile(Loc(dir), orbax::kShardingFile);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto entries = orbax::ParseShardingFile(*text, dir);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ(entries->begin()->first, "params.w");
  EXPECT_EQ(entries->begin()->second,
            R"({"sharding_type": "NamedSharding", "shape": [2], "axis_names": ["data"], )"
            R"("axis_types": ["AxisType.Auto"], "partition_spec": ["data", null], )"
            R"("device_mesh": {"mesh": [{"id": 1}, {"id": 0}]}})");
}

TEST(SaveSharding, FactsThatDisagreeFailTheSaveNamingTheLeaf) {
  const std::string dir = TempDir("sharding_bad") + "/item";
  std::vector<float> w = Iota(24);
  SaveRequest r;
  r.directory = dir;
  SaveLeaf l = ArrayLeaf("w", {4, 6}, {2, 6});
  l.shards = {Shard(w, {4, 6}, Box({0, 0}, {4, 6}))};
  l.sharding = Mesh2();
  l.sharding->device_ids = {0, 1, 2};
  r.leaves = {l};
  auto coordinator = NewSingleProcessCoordinator();
  Status s = Save(r, *coordinator);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("params.w"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("3 device ids"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir)) << "no checkpoint is left";
}

}  // namespace
}  // namespace cairn::engine
