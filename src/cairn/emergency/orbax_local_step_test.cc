// Rebuilding the record of a local step Orbax's emergency manager wrote
// (orbax_local_step.h): which boxes a process's devices hold under a
// NamedSharding as Orbax stores it in `_sharding`, and what is not an Orbax
// local step. The whole path against real Orbax output is
// tests/python/test_emergency_orbax_interop.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cairn/emergency/orbax_local_step.h"

namespace cairn::emergency {
namespace {
namespace fs = std::filesystem;

// A (2, 4) mesh ("replica", "data") over 4 processes x 2 devices with jax's
// CPU device ids, as Orbax wrote it on 4 jax.distributed processes.
std::string Named(const std::string& spec) {
  return R"({"sharding_type": "NamedSharding", "shape": [2, 4], "axis_names": ["replica", "data"],)"
         R"( "axis_types": ["AxisType.Auto", "AxisType.Auto"], "partition_spec": )" +
         spec +
         R"(, "device_mesh": {"mesh": [[{"id": 0}, {"id": 1}, {"id": 2048}, {"id": 2049}],)"
         R"( [{"id": 4096}, {"id": 4097}, {"id": 6144}, {"id": 6145}]]}})";
}

const std::vector<int64_t> kProcess2 = {4096, 4097};
const std::vector<int64_t> kProcess3 = {6144, 6145};

TEST(OrbaxLocalStep, BoxesFollowTheDevicesPlaceInTheMesh) {
  // Rows split over "data": process 3 holds data blocks 2 and 3.
  auto rows = BoxesOfDevices(Named(R"(["data", null])"), {16, 6}, kProcess3, "w");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, (std::vector<Box>{Box({8, 0}, {4, 6}), Box({12, 0}, {4, 6})}));
  // Replicated: one full box, however many devices hold it.
  auto full = BoxesOfDevices(Named("[]"), {6}, kProcess2, "b");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(*full, (std::vector<Box>{Box({0}, {6})}));
  auto scalar = BoxesOfDevices(Named("[]"), {}, kProcess2, "count");
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_EQ(scalar->size(), 1u);
  // Split over both axes (8 ways): process 2's devices are mesh (1, 0), (1, 1).
  auto both = BoxesOfDevices(Named(R"([["replica", "data"]])"), {16}, kProcess2, "v");
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(*both, (std::vector<Box>{Box({8}, {2}), Box({10}, {2})}));
  // Uneven: 6 columns over 4 devices are blocks of 2, the last one empty.
  auto uneven = BoxesOfDevices(Named(R"([null, "data"])"), {8, 6}, kProcess3, "emb");
  ASSERT_TRUE(uneven.ok()) << uneven.status().ToString();
  EXPECT_EQ(*uneven, (std::vector<Box>{Box({0, 4}, {8, 2})}));
  // Devices outside the mesh hold nothing.
  auto none = BoxesOfDevices(Named(R"(["data", null])"), {16, 6}, {7}, "w");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
}

TEST(OrbaxLocalStep, ShardingsCairnCannotPlaceAreErrorsNamingTheArray) {
  auto unknown_axis = BoxesOfDevices(Named(R"(["model", null])"), {16, 6}, kProcess2, "array `w`");
  ASSERT_FALSE(unknown_axis.ok());
  EXPECT_EQ(unknown_axis.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown_axis.status().message().find("array `w`"), std::string::npos);
  EXPECT_NE(unknown_axis.status().message().find("unknown mesh axis `model`"), std::string::npos);

  std::string wrong_mesh = Named(R"(["data", null])");
  wrong_mesh.replace(wrong_mesh.find("[2, 4]"), 6, "[2, 2]");
  auto bad = BoxesOfDevices(wrong_mesh, {16, 6}, kProcess2, "w");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not have the mesh's shape"), std::string::npos);

  auto too_long = BoxesOfDevices(Named(R"(["data", null, null])"), {16, 6}, kProcess2, "w");
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("more entries than the array has dimensions"), std::string::npos);

  auto other = BoxesOfDevices(R"({"sharding_type": "PositionalSharding"})", {4}, kProcess2, "w");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("`PositionalSharding`"), std::string::npos);

  // Control: the same spec on a mesh axis that exists places fine.
  auto control = BoxesOfDevices(Named(R"(["replica", null])"), {16, 6}, kProcess2, "w");
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  EXPECT_EQ(*control, (std::vector<Box>{Box({8, 0}, {8, 6})}));
}

TEST(OrbaxLocalStep, AStepWithoutProcessMetadataOrDatabaseIsNotOne) {
  const fs::path root = fs::temp_directory_path() / ("cairn_orbax_local_step_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "3" / "state");
  auto no_metadata = RecordFromOrbaxLocalStep(*orbax::OpenLocation((root / "3").string()), 3);
  ASSERT_FALSE(no_metadata.ok());
  EXPECT_EQ(no_metadata.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_metadata.status().message().find("global_process_metadata.json"), std::string::npos);

  fs::create_directories(root / "3" / "process_metadata");
  std::ofstream(root / "3" / "process_metadata" / "global_process_metadata.json") << "[[0, 1], [2, 3]]";
  auto no_database = RecordFromOrbaxLocalStep(*orbax::OpenLocation((root / "3").string()), 3);
  ASSERT_FALSE(no_database.ok());
  EXPECT_EQ(no_database.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_database.status().message().find("ocdbt.process_"), std::string::npos);

  // An owner outside the process list is malformed, not absent.
  fs::create_directories(root / "3" / "state" / "ocdbt.process_5");
  auto outside = RecordFromOrbaxLocalStep(*orbax::OpenLocation((root / "3").string()), 3);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("owner process 5"), std::string::npos);
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn::emergency
