// Unit tests for the pieces of layout/inspect that need no Orbax peer:
// chunk grids, local path detection, classification of non-checkpoints.
// The commands end to end are tested against orbax-checkpoint in
// tests/python/test_cli_inspect.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/inspect/chunk_grid.h"
#include "cairn/layout/inspect/verify.h"

namespace cairn::inspect {
namespace {

namespace fs = std::filesystem;

ArrayMetadata Md(Shape shape, Shape chunks) {
  ArrayMetadata md;
  md.shape = std::move(shape);
  md.chunk_shape = std::move(chunks);
  return md;
}

TEST(ChunkGrid, ShapeCountsAndOrder) {
  ArrayMetadata md = Md({10, 6}, {4, 6});
  EXPECT_EQ(ChunkGridShape(md), (Shape{3, 1}));
  EXPECT_EQ(NumCells(ChunkGridShape(md)), 3u);
  EXPECT_EQ(NumCells(ChunkGridShape(Md({0, 5}, {2, 2}))), 0u);
  EXPECT_EQ(NumCells(ChunkGridShape(Md({}, {}))), 1u);  // rank 0: one chunk
  std::vector<std::vector<Index>> seen;
  Shape grid = {2, 3};
  std::vector<Index> cell = {0, 0};
  do seen.push_back(cell); while (NextGridCell(cell, grid));
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[1], (std::vector<Index>{0, 1}));
  EXPECT_EQ(seen[3], (std::vector<Index>{1, 0}));
  Box last = CellBoxInArray({2, 0}, md);
  EXPECT_EQ(last.origin, (std::vector<Index>{8, 0}));
  EXPECT_EQ(last.shape, (Shape{2, 6}));  // clipped at the array's edge
}

TEST(LocalPathOf, PathsAndFileUrlsOnly) {
  EXPECT_EQ(LocalPathOf("/a/b"), "/a/b");
  EXPECT_EQ(LocalPathOf("rel/dir"), "rel/dir");
  EXPECT_EQ(LocalPathOf("file:///a/b/"), "/a/b/");
  EXPECT_EQ(LocalPathOf("file:///a/|ocdbt:"), std::nullopt);
  EXPECT_EQ(LocalPathOf("memory://x/"), std::nullopt);
  EXPECT_EQ(LocalPathOf(""), std::nullopt);
}

class InspectDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cairn_inspect_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  orbax::Location L() const { return *orbax::OpenLocation(dir_.string()); }
  fs::path dir_;
};

TEST_F(InspectDirTest, PlainDirectoryIsNoCheckpoint) {
  std::ofstream(dir_ / "file.txt") << "x";
  auto kind = ClassifyCheckpoint(L());
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.status().code(), StatusCode::kNotFound);
  EXPECT_NE(std::string(kind.status().message()).find(dir_.string()), std::string::npos);
  EXPECT_FALSE(VerifyCheckpoint(L()).ok());
}

TEST_F(InspectDirTest, ItemWithoutMetadataIsReportedNotFatal) {
  fs::create_directories(dir_ / "array_metadatas");
  ASSERT_EQ(*ClassifyCheckpoint(L()), CheckpointKind::kItem);
  auto report = VerifyCheckpoint(L());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_EQ(report->problems[0].kind, "missing_metadata");
  EXPECT_EQ(report->problems[0].file, (dir_ / "_METADATA").string());
}

TEST_F(InspectDirTest, RootWithOnlyATmpStepReportsIt) {
  fs::create_directories(dir_ / "3.orbax-checkpoint-tmp" / "state");
  ASSERT_EQ(*ClassifyCheckpoint(L()), CheckpointKind::kRoot);
  auto report = VerifyCheckpoint(L());
  ASSERT_TRUE(report.ok());
  // Not damage: a warning with what a manager does with it.
  EXPECT_TRUE(report->problems.empty());
  ASSERT_EQ(report->warnings.size(), 1u);
  EXPECT_EQ(report->warnings[0].kind, "uncommitted");
  EXPECT_EQ(report->warnings[0].file, (dir_ / "3.orbax-checkpoint-tmp").string());
  EXPECT_NE(report->warnings[0].message.find("step 3 was never committed"), std::string::npos);
  auto info = DescribeCheckpoint(L());
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->steps.size(), 1u);
  EXPECT_EQ(info->steps[0].step, 3);
  EXPECT_FALSE(info->steps[0].finalized);
  EXPECT_TRUE(info->step_dir.empty());
}

}  // namespace
}  // namespace cairn::inspect
