// ShardingJson: the `_sharding` entry in the form orbax-checkpoint writes
// (the expected texts are json.dumps of what Orbax builds for these
// shardings; tests/python/test_orbax_write.py checks Orbax reads them).
#include <gtest/gtest.h>

#include "cairn/layout/orbax/sharding.h"

namespace cairn::orbax {
namespace {

ShardingMetadata Mesh2x2() {
  ShardingMetadata s;
  s.mesh_shape = {2, 2};
  s.axis_names = {"data", "model"};
  s.axis_types = {"AxisType.Auto", "AxisType.Explicit"};
  s.partition_spec = {{PartitionSpecEntry::Kind::kAxis, {"data"}},
                      {PartitionSpecEntry::Kind::kNone, {}},
                      {PartitionSpecEntry::Kind::kAxes, {"model", "x"}}};
  s.device_ids = {0, 1, 3, 2};
  return s;
}

TEST(ShardingJson, NamedShardingAsOrbaxWritesIt) {
  Result<std::string> j = ShardingJson(Mesh2x2(), "w");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j,
            R"({"sharding_type": "NamedSharding", "shape": [2, 2], "axis_names": ["data", "model"], )"
            R"("axis_types": ["AxisType.Auto", "AxisType.Explicit"], "partition_spec": ["data", null, )"
            R"(["model", "x"]], "device_mesh": {"mesh": [[{"id": 0}, {"id": 1}], [{"id": 3}, {"id": 2}]]}})");
}

TEST(ShardingJson, AxisTypesDefaultToAutoAndEmptySpecIsAnEmptyList) {
  ShardingMetadata s;
  s.mesh_shape = {3};
  s.axis_names = {"d"};
  s.device_ids = {4, 5, 6};
  Result<std::string> j = ShardingJson(s, "w");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j, R"({"sharding_type": "NamedSharding", "shape": [3], "axis_names": ["d"], )"
                R"("axis_types": ["AxisType.Auto"], "partition_spec": [], )"
                R"("device_mesh": {"mesh": [{"id": 4}, {"id": 5}, {"id": 6}]}})");
}

TEST(ShardingJson, SingleDeviceSharding) {
  ShardingMetadata s;
  s.kind = ShardingMetadata::Kind::kSingleDevice;
  s.device_str = "cpu:0";
  Result<std::string> j = ShardingJson(s, "w");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j, R"({"sharding_type": "SingleDeviceSharding", "device_str": "cpu:0"})");
}

TEST(ShardingJson, RejectsMeshPartsThatDisagreeNamingTheLeaf) {
  ShardingMetadata s = Mesh2x2();
  s.device_ids.pop_back();
  Result<std::string> j = ShardingJson(s, "params.w");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("params.w"), std::string::npos) << j.status().ToString();
  EXPECT_NE(j.status().message().find("3 device ids"), std::string::npos) << j.status().ToString();

  s = Mesh2x2();
  s.axis_names = {"data"};
  j = ShardingJson(s, "params.w");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("1 axis names"), std::string::npos) << j.status().ToString();

  s = Mesh2x2();
  s.partition_spec[0].axes.push_back("model");
  j = ShardingJson(s, "params.w");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("entry 0 names 2 axes"), std::string::npos) << j.status().ToString();
}

}  // namespace
}  // namespace cairn::orbax
