// The front door's one leaf converter: every field of the public array
// types reaches the engine (engine/checkpoint_manager_public.cc's copy
// dropped `immutable`, so the public manager copied buffers the caller had
// promised to keep).
#include "cairn/api/leaves.h"

#include <gtest/gtest.h>

namespace cairn::api {
namespace {

TEST(SaveLeavesOf, CarriesEveryField) {
  std::vector<float> w(24);
  CheckpointArray a{{"params", "w"}, "bfloat16", {4, 6}, {2, 6}, 2, {}};
  a.shards = {{{0, 0}, {2, 6}, w.data(), 1, /*immutable=*/true},
              {{2, 0}, {2, 6}, w.data() + 12, 0, /*immutable=*/false}};
  auto leaves = SaveLeavesOf({a});
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  ASSERT_EQ(leaves->size(), 1u);
  const engine::SaveLeaf& leaf = (*leaves)[0];
  EXPECT_EQ(orbax::ParamName(leaf.path), "params.w");
  EXPECT_EQ(leaf.dtype, DType::kBFloat16);
  EXPECT_EQ(leaf.shape, (Shape{4, 6}));
  EXPECT_EQ(leaf.write_shape, (Shape{2, 6}));
  EXPECT_EQ(leaf.num_replicas, 2);
  ASSERT_EQ(leaf.shards.size(), 2u);
  EXPECT_EQ(leaf.shards[0].box, Box({0, 0}, {2, 6}));
  EXPECT_EQ(leaf.shards[0].data, w.data());
  EXPECT_EQ(leaf.shards[0].replica_id, 1);
  EXPECT_TRUE(leaf.shards[0].immutable);
  EXPECT_EQ(leaf.shards[1].box, Box({2, 0}, {2, 6}));
  EXPECT_FALSE(leaf.shards[1].immutable);
}

TEST(SaveLeavesOf, UnknownDtypeNamesTheArray) {
  CheckpointArray a{{"opt", "mu"}, "float13", {4}, {}, 1, {}};
  auto leaves = SaveLeavesOf({a});
  ASSERT_FALSE(leaves.ok());
  EXPECT_EQ(leaves.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(leaves.status().message().find("opt.mu"), std::string::npos) << leaves.status().ToString();
  EXPECT_NE(leaves.status().message().find("float13"), std::string::npos) << leaves.status().ToString();
}

TEST(RestoreArraysOf, DtypeOptionalOrRequired) {
  std::vector<float> out(6);
  RestoreArray a{{"params", "b"}, "", {{{0}, {6}, out.data()}}};
  auto any = RestoreArraysOf({a}, /*dtype_required=*/false);
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  EXPECT_EQ((*any)[0].param, "params.b");
  EXPECT_FALSE((*any)[0].dtype.has_value());
  ASSERT_EQ((*any)[0].boxes.size(), 1u);
  EXPECT_EQ((*any)[0].boxes[0].data, out.data());
  auto required = RestoreArraysOf({a}, /*dtype_required=*/true);
  EXPECT_EQ(required.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(required.status().message().find("`params.b`: the dtype is required"), std::string::npos)
      << required.status().ToString();
  a.dtype = "int32";
  auto typed = RestoreArraysOf({a}, /*dtype_required=*/true);
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ((*typed)[0].dtype, DType::kInt32);
}

TEST(SaveLeavesOf, CarriesWhatPythonPasses) {
  std::vector<float> w(24);
  CheckpointArray a;
  a.path = {"opt", "0", "mu"};
  a.key_kinds = {PathKeyKind::kDict, PathKeyKind::kSequence, PathKeyKind::kDict};
  a.dtype = "float32";
  a.shape = {4, 6};
  // A jax.Array on 4 devices, two rows each, every box held twice: the
  // write shape is the first device's box, held by 2.
  a.layout_from = ShardingLayout{{{{0, 0}, {2, 6}}, {{0, 0}, {2, 6}}, {{2, 0}, {2, 6}}, {{2, 0}, {2, 6}}}, 2};
  CheckpointShard s;
  s.origin = {0, 0};
  s.shape = {2, 6};
  s.data = w.data();
  s.byte_strides = {4, 8};  // column-major
  s.item_size = 4;
  a.shards = {s};
  a.random_key_impl = "threefry2x32";
  ShardingFacts f;
  f.mesh_shape = {2, 2};
  f.axis_names = {"data", "model"};
  f.device_ids = {0, 1, 2, 3};
  f.partition_spec = {{PartitionSpecEntry::Kind::kAxis, {"data"}}, {}};
  a.sharding = f;
  CheckpointArray text;
  text.path = {"name"};
  text.value_type = "string";  // no dtype needed
  text.string_value = "run-7";
  auto leaves = SaveLeavesOf({a, text});
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  const engine::SaveLeaf& leaf = (*leaves)[0];
  EXPECT_EQ(orbax::KeyString(leaf.path), orbax::KeyString({{"opt", orbax::KeyType::kDict},
                                                          {"0", orbax::KeyType::kSequence},
                                                          {"mu", orbax::KeyType::kDict}}));
  EXPECT_EQ(leaf.write_shape, (Shape{2, 6}));
  EXPECT_EQ(leaf.num_replicas, 2);
  EXPECT_EQ(leaf.shards[0].byte_strides, (std::vector<Index>{4, 8}));
  EXPECT_EQ(leaf.random_key_impl, "threefry2x32");
  ASSERT_TRUE(leaf.sharding.has_value());
  EXPECT_EQ(leaf.sharding->axis_names, (std::vector<std::string>{"data", "model"}));
  ASSERT_EQ(leaf.sharding->partition_spec.size(), 2u);
  EXPECT_EQ(leaf.sharding->partition_spec[0].kind, orbax::PartitionSpecEntry::Kind::kAxis);
  EXPECT_EQ(leaf.sharding->partition_spec[1].kind, orbax::PartitionSpecEntry::Kind::kNone);
  EXPECT_EQ((*leaves)[1].value_type, "string");
  EXPECT_EQ((*leaves)[1].string_value, "run-7");
}

TEST(SaveLeavesOf, RefusesWhatDoesNotFit) {
  std::vector<double> w(4);
  CheckpointArray a{{"w"}, "float32", {4}, {}, 1, {{{0}, {4}, w.data()}}};
  a.shards[0].item_size = 8;  // float64 buffer for a float32 array
  auto wrong_size = SaveLeavesOf({a});
  EXPECT_EQ(wrong_size.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_size.status().message().find("shard item size 8 differs from the dtype's"), std::string::npos)
      << wrong_size.status().ToString();
  a.shards[0].item_size = 4;
  a.key_kinds = {static_cast<PathKeyKind>(3)};
  EXPECT_NE(SaveLeavesOf({a}).status().message().find("key_type must be 1 or 2"), std::string::npos);
  a.key_kinds = {};
  a.dtype = "";
  auto no_dtype = SaveLeavesOf({a});
  EXPECT_NE(no_dtype.status().message().find("saving `w`: the dtype is required"), std::string::npos)
      << no_dtype.status().ToString();
  a.dtype = "float32";
  a.layout_from = ShardingLayout{{}, 1};  // a jax.Array without device boxes
  auto no_boxes = SaveLeavesOf({a});
  EXPECT_EQ(no_boxes.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_boxes.status().message().find("w"), std::string::npos) << no_boxes.status().ToString();
  a.layout_from = std::nullopt;
  EXPECT_TRUE(SaveLeavesOf({a}).ok());
}

TEST(RestoreArraysOf, ParamStridesOtherBoxesAndMappingSlots) {
  std::vector<float> out(6);
  RestoreArray a{{}, "", {{{0}, {6}, out.data(), {4}}}, "opt.0.mu", {{{0}, {3}}, {{3}, {3}}}};
  std::vector<std::vector<std::shared_ptr<MappedBytes>>> slots;
  auto r = RestoreArraysOf({a}, /*dtype_required=*/false, &slots);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].param, "opt.0.mu");
  EXPECT_EQ((*r)[0].boxes[0].byte_strides, (std::vector<Index>{4}));
  EXPECT_EQ((*r)[0].boxes_of_other_processes, (std::vector<Box>{Box({0}, {3}), Box({3}, {3})}));
  ASSERT_EQ(slots.size(), 1u);
  ASSERT_EQ(slots[0].size(), 1u);
  EXPECT_EQ((*r)[0].boxes[0].mapped, &slots[0][0]);
  auto unmapped = RestoreArraysOf({a}, /*dtype_required=*/false);
  EXPECT_EQ((*unmapped)[0].boxes[0].mapped, nullptr);
}

}  // namespace
}  // namespace cairn::api
