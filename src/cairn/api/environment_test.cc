// include/cairn/environment.h: the launcher's variables, read in one place.
#include "cairn/environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace cairn {
namespace {

class MpiEnvironment : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
  }
};

TEST_F(MpiEnvironment, WorldSize) {
  EXPECT_EQ(MpiWorldSizeFromEnvironment(), 1);
  setenv("PMI_SIZE", "3", 1);
  EXPECT_EQ(MpiWorldSizeFromEnvironment(), 3);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT_EQ(MpiWorldSizeFromEnvironment(), 4);  // OpenMPI's first
  setenv("OMPI_COMM_WORLD_SIZE", "four", 1);
  EXPECT_EQ(MpiWorldSizeFromEnvironment(), 3);  // not a number: the next one
  setenv("OMPI_COMM_WORLD_SIZE", "", 1);
  EXPECT_EQ(MpiWorldSizeFromEnvironment(), 3);
}

TEST_F(MpiEnvironment, AloneWithoutMpirun) {
  auto c = CoordinatorFromEnvironment(std::chrono::seconds(5));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, nullptr);
  setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  c = CoordinatorFromEnvironment(std::chrono::seconds(5));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, nullptr);
}

}  // namespace
}  // namespace cairn
