// The write-shape policy (write_shape.h).
#include <gtest/gtest.h>

#include "cairn/engine/write_shape.h"

namespace cairn::engine {
namespace {

TEST(WriteShape, NumpySplitsAlongTheFirstAxisTheProcessCountDivides) {
  EXPECT_EQ(ReplicatedWriteShape({6, 4}, 1), (Shape{6, 4}));
  EXPECT_EQ(ReplicatedWriteShape({6, 4}, 2), (Shape{3, 4}));
  EXPECT_EQ(ReplicatedWriteShape({5, 4}, 2), (Shape{5, 2}));
  EXPECT_EQ(ReplicatedWriteShape({5, 3}, 2), (Shape{5, 3}));
  EXPECT_EQ(ReplicatedWriteShape({0, 4}, 2), (Shape{0, 2}));  // an empty axis is not split
  EXPECT_EQ(ReplicatedWriteShape({}, 4), (Shape{}));
}

TEST(WriteShape, NumpyAndScalarsHaveOneReplicaPerProcess) {
  Result<WriteLayout> l = WriteLayoutOf("np.ndarray", {8}, {}, 4, "w");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->write_shape, (Shape{2}));
  EXPECT_EQ(l->num_replicas, 4);
  l = WriteLayoutOf("scalar", {}, {}, 3, "s");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->write_shape, (Shape{}));
  EXPECT_EQ(l->num_replicas, 3);
  l = WriteLayoutOf("string", {}, {}, 3, "name");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->write_shape, (Shape{}));
  EXPECT_EQ(l->num_replicas, 1);
}

TEST(WriteShape, JaxArrayTakesTheFirstDevicesBoxAndCountsItsReplicas) {
  // 4 devices, sharded 2 ways along axis 0 and replicated twice; the last
  // shard of an uneven split is smaller.
  std::vector<Box> boxes = {Box({0, 0}, {3, 4}), Box({3, 0}, {2, 4}), Box({0, 0}, {3, 4}),
                            Box({3, 0}, {2, 4})};
  Result<WriteLayout> l = WriteLayoutOf("jax.Array", {5, 4}, boxes, 2, "w");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->write_shape, (Shape{3, 4}));
  EXPECT_EQ(l->num_replicas, 2);
  // Fully replicated over 3 devices.
  l = WriteLayoutOf("jax.Array", {5}, {Box({0}, {5}), Box({0}, {5}), Box({0}, {5})}, 1, "w");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->write_shape, (Shape{5}));
  EXPECT_EQ(l->num_replicas, 3);
}

TEST(WriteShape, RejectsBadFactsNamingTheLeaf) {
  Result<WriteLayout> l = WriteLayoutOf("jax.Array", {5}, {}, 1, "params.w");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("params.w"), std::string::npos) << l.status().ToString();
  l = WriteLayoutOf("jax.Array", {5, 4}, {Box({0}, {5})}, 1, "params.w");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("rank"), std::string::npos) << l.status().ToString();
  l = WriteLayoutOf("np.ndarray", {5}, {}, 0, "params.b");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("params.b"), std::string::npos) << l.status().ToString();
}

}  // namespace
}  // namespace cairn::engine
