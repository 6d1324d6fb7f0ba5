// `cairn diff` (diff.h) bounds its work by the chunks stored on either side
// (diff_boxes.h): the boxes it reads, and arrays declaring 2^60 chunks of
// which a few are stored. The commands end to end are tested against
// orbax-checkpoint in tests/python/test_cli_inspect.py and
// test_cli_diff_hostile.py.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "cairn/kvstore/url.h"
#include "cairn/layout/inspect/diff.h"
#include "cairn/layout/inspect/diff_boxes.h"
#include "cairn/util/testing/temp_dir.h"
#include "cairn/zarr/array.h"

namespace cairn::inspect {
namespace {

StoredChunks Stored(Shape grid, std::vector<GridCell> cells) {
  StoredChunks s;
  s.grid = std::move(grid);
  s.cells = GridCells(s.grid);
  s.stored = std::move(cells);
  return s;
}

TEST(CompareBoxShape, LargerChunkPerDimensionBoundedInBytes) {
  EXPECT_EQ(CompareBoxShape({100, 100}, {10, 40}, {20, 5}, 4), (Shape{20, 40}));
  EXPECT_EQ(CompareBoxShape({100}, {}, {7}, 4), (Shape{7}));  // a chunk of the wrong rank is ignored
  EXPECT_EQ(CompareBoxShape({100}, {}, {}, 4), (Shape{100}));
  EXPECT_EQ(CompareBoxShape({}, {}, {}, 4), (Shape{}));
  // 2^30 float32 elements in one chunk: halved to 2^24 (64 MiB).
  EXPECT_EQ(CompareBoxShape({Index{1} << 30}, {Index{1} << 30}, {4}, 4), (Shape{Index{1} << 24}));
}

TEST(TouchedCompareCells, OnlyCellsOverlappingAStoredChunk) {
  // Shape 24; A in chunks of 4 (chunk 1: elements 4..7), B in chunks of 6
  // (chunk 3: 18..23); compared in boxes of 6.
  const Shape shape{24}, box{6};
  const CompareCells c = TouchedCompareCells(shape, box, Stored({6}, {{1}}), {4},
                                             Stored({4}, {{3}}), {6});
  EXPECT_EQ(c.grid, (Shape{4}));
  EXPECT_EQ(c.touched, (std::vector<GridCell>{{0}, {1}, {3}}));
  EXPECT_EQ(c.untouched_elements, 6u);
  ASSERT_TRUE(c.first_untouched.has_value());
  EXPECT_EQ(*c.first_untouched, (GridCell{2}));
}

TEST(TouchedCompareCells, TwoDimensionsWithAClippedEdge) {
  // Shape 5x7 in boxes (and chunks) of 2x3: the grid is 3x3, the last row
  // and column are clipped.
  const Shape shape{5, 7}, box{2, 3};
  const CompareCells c = TouchedCompareCells(shape, box, Stored({3, 3}, {{0, 0}, {2, 2}}), box,
                                             Stored({3, 3}, {{2, 2}}), box);
  EXPECT_EQ(c.touched, (std::vector<GridCell>{{0, 0}, {2, 2}}));
  EXPECT_EQ(c.untouched_elements, 35u - 6u - 1u);
  EXPECT_EQ(*c.first_untouched, (GridCell{0, 1}));
  EXPECT_EQ(CompareBox({2, 2}, shape, box).shape, (Shape{1, 1}));
}

TEST(TouchedCompareCells, EverythingStoredOrNothingToCompare) {
  const CompareCells all = TouchedCompareCells({8}, {4}, Stored({2}, {{0}, {1}}), {4},
                                               Stored({2}, {}), {4});
  EXPECT_EQ(all.untouched_elements, 0u);
  EXPECT_FALSE(all.first_untouched.has_value());
  const CompareCells scalar = TouchedCompareCells({}, {}, Stored({}, {{}}), {}, Stored({}, {}), {});
  EXPECT_EQ(scalar.touched, (std::vector<GridCell>{{}}));
  EXPECT_EQ(scalar.untouched_elements, 0u);
  const CompareCells empty = TouchedCompareCells({0, 3}, {1, 3}, Stored({0, 1}, {}), {1, 3},
                                                 Stored({0, 1}, {}), {1, 3});
  EXPECT_TRUE(empty.touched.empty());
  EXPECT_FALSE(empty.first_untouched.has_value());
}

TEST(TouchedCompareCells, AHugeDeclaredGridCostsTheStoredChunksOnly) {
  const Index n = Index{1} << 62;
  const CompareCells c = TouchedCompareCells({n}, {4}, Stored({n / 4}, {{0}}), {4},
                                             Stored({n / 4}, {{0}, {n / 4 - 1}}), {4});
  EXPECT_EQ(c.touched, (std::vector<GridCell>{{0}, {n / 4 - 1}}));
  EXPECT_EQ(c.untouched_elements, static_cast<uint64_t>(n) - 8);
  EXPECT_EQ(*c.first_untouched, (GridCell{1}));
}

TEST(UnlistedCompareBoxes, RefusedBeyondTheBoundNamingTheArrayAndSide) {
  auto n = UnlistedCompareBoxes("w", {100, 10}, {4, 10}, "B (safetensors)");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 25u);
  n = UnlistedCompareBoxes("w", {Index{4} << 22}, {4}, "B (safetensors)");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, kMaxUnlistedCompareBoxes);
  n = UnlistedCompareBoxes("params.w", {Index{1} << 62}, {4}, "B (safetensors)");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(n.status().message(),
            "diff: array `params.w` would be compared in 1152921504606846976 boxes of [4] "
            "(shape [4611686018427387904]), and B (safetensors) cannot list its stored chunks "
            "to skip the empty ones; refusing more than 4194304 boxes");
}

// A float32 zarr v3 array of shape [2^62] in chunks of 4 (2^60 chunks) at
// `dir`, with fill value `fill`; chunk 0 holds 0..3 (+ `bump` at element 1).
std::string HugeArray(const std::string& dir, const std::string& fill, float bump) {
  auto store = OpenKvStore("file://" + dir + "/");
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  auto json = ParseJson(R"({"shape":[4611686018427387904],"data_type":"float32",)"
                        R"("chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},)"
                        R"("fill_value":)" + fill + "}",
                        "test");
  EXPECT_TRUE(json.ok());
  auto array = ZarrArray::Create(*store, "", ZarrFormat::kV3, *json);
  EXPECT_TRUE(array.ok()) << array.status().ToString();
  const float values[4] = {0, 1 + bump, 2, 3};
  EXPECT_TRUE((*array)->Write(Box{{0}, {4}}, values).ok());
  return "file://" + dir + "/|zarr3:";
}

TEST(Diff, HugeSparseArraysAreComparedByTheChunksStored) {
  testing::TempDir dir("cairn_diff");
  const std::string a = HugeArray(dir.path + "/a", "0", 0);
  const std::string same = HugeArray(dir.path + "/same", "0", 0);
  const std::string changed = HugeArray(dir.path + "/changed", "0", 0.5);
  const std::string other_fill = HugeArray(dir.path + "/other_fill", "7", 0);
  const auto start = std::chrono::steady_clock::now();

  auto r = Diff(a, same);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->identical());
  ASSERT_EQ(r->arrays.size(), 1u);
  EXPECT_TRUE(r->arrays[0].values_compared);

  r = Diff(a, changed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->identical());
  EXPECT_EQ(r->arrays[0].num_different, 1u);
  EXPECT_DOUBLE_EQ(r->arrays[0].max_abs, 0.5);

  // Fill values 0 and 7: every element stored on neither side differs.
  r = Diff(a, other_fill);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->identical());
  EXPECT_EQ(r->arrays[0].num_different, (uint64_t{1} << 62) - 4);
  EXPECT_DOUBLE_EQ(r->arrays[0].max_abs, 7);
  EXPECT_DOUBLE_EQ(r->arrays[0].max_rel, 1);

  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace cairn::inspect
