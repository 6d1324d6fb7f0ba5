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

}  // namespace
}  // namespace cairn::api
