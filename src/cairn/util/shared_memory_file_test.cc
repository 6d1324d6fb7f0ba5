#include "cairn/util/shared_memory_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace cairn {
namespace {

std::string TestPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("cairn_shm_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(SharedMemoryFile, TwoOpeningsOfOneNameShareTheirBytes) {
  const std::string path = TestPath("share");
  auto a = SharedMemoryFile::Open(path, 3 * 4096 + 10);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = SharedMemoryFile::Open(path, 3 * 4096 + 10);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  (*a)->PopulateWrite(4096, 4096 * 2 + 10);
  (*a)->data()[3 * 4096 + 9] = 0x5a;
  (*b)->PopulateRead(0, 3 * 4096 + 10);
  EXPECT_EQ((*b)->data()[3 * 4096 + 9], 0x5a);
  (*a)->Unlink();
  EXPECT_FALSE(std::filesystem::exists(path));
  (*b)->Unlink();  // already gone: fine
  (*b)->data()[0] = 1;  // the mapping outlives the name
  EXPECT_EQ((*a)->data()[0], 1);
}

TEST(SharedMemoryFile, AnotherSizeIsNotTheSameExchange) {
  const std::string path = TestPath("size");
  auto a = SharedMemoryFile::Open(path, 8192);
  ASSERT_TRUE(a.ok());
  auto b = SharedMemoryFile::Open(path, 4096);
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition) << b.status().ToString();
  EXPECT_NE(b.status().message().find(path), std::string::npos);
  a->reset();
  EXPECT_FALSE(std::filesystem::exists(path)) << "the destructor unlinks";
}

TEST(SharedMemoryFile, ErrorsNameThePath) {
  auto a = SharedMemoryFile::Open("/nonexistent-dir-cairn/x", 4096);
  EXPECT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("/nonexistent-dir-cairn/x"), std::string::npos);
  EXPECT_FALSE(SharedMemoryFile::Open(TestPath("zero"), 0).ok());
  EXPECT_FALSE(ThisHostId().empty());
}

}  // namespace
}  // namespace cairn
