// include/cairn/inspect.h and include/cairn/convert.h: what the CLI calls,
// through the front door alone (a checkpoint saved by cairn::SaveCheckpoint,
// listed, described, verified, diffed and converted).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cairn/convert.h"
#include "cairn/engine.h"
#include "cairn/inspect.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn {
namespace {
namespace fs = std::filesystem;

std::string TempDir(const std::string& name) { return ::cairn::testing::TestDir("cairn_inspect_api_test", name); }

// An Orbax item with one 4x3 float32 array "params.w" (a file per chunk,
// chunks 2x3), as SaveCheckpoint writes it.
std::string SaveStep(const std::string& name, float offset = 0) {
  const std::string step = TempDir(name) + "/7";
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = offset + static_cast<float>(i);
  CheckpointArray a{{"params", "w"}, "float32", {4, 3}, {2, 3}, 1, {{{0, 0}, {4, 3}, v.data(), 0}}};
  SaveCheckpointOptions options;
  options.use_ocdbt = false;
  auto coordinator = NewSingleProcessCoordinator();
  Status saved = SaveCheckpoint(step, {a}, options, *coordinator);
  EXPECT_TRUE(saved.ok()) << saved.ToString();
  return step;
}

TEST(InspectApi, ListsDescribesAndVerifiesAnOrbaxItem) {
  const std::string step = SaveStep("list");
  auto listing = ListAddress(step);
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(listing->kind, ListingKind::kCheckpoint);
  EXPECT_EQ(listing->format, "orbax");
  ASSERT_EQ(listing->arrays.size(), 1u);
  EXPECT_EQ(listing->arrays[0].path, "params.w");
  EXPECT_EQ(listing->arrays[0].dtype, "float32");
  EXPECT_EQ(listing->arrays[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_GT(listing->arrays[0].bytes, 0u);
  const std::string json = ToJson(*listing);
  EXPECT_EQ(json.rfind("[{\"bytes\":", 0), 0u) << json;
  EXPECT_NE(json.find("\"path\":\"params.w\",\"shape\":[4,3]}]"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"format\""), std::string::npos) << json;  // Orbax rows carry no format

  auto d = DescribeCheckpoint(step);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->format, "orbax");
  EXPECT_EQ(d->kind, "item");
  EXPECT_EQ(d->variant, "dir+zarr3");
  EXPECT_TRUE(d->ok());
  ASSERT_EQ(d->items.size(), 1u);
  EXPECT_TRUE(d->items[0].is_pytree);
  EXPECT_EQ(d->items[0].arrays.size(), 1u);
  EXPECT_NE(ToJson(*d).find("\"format\":\"dir+zarr3\""), std::string::npos) << ToJson(*d);

  auto report = VerifyCheckpoint(step);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->arrays, 1u);
  EXPECT_EQ(report->chunks, 2u);

  // A chunk file cut short is damage, named by array and file.
  bool cut = false;
  for (const auto& e : fs::recursive_directory_iterator(step)) {
    if (!cut && e.is_regular_file() && e.path().string().find("/params.w/c/") != std::string::npos) {
      fs::resize_file(e.path(), 3);
      cut = true;
    }
  }
  ASSERT_TRUE(cut);
  report = VerifyCheckpoint(step);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_FALSE(report->ok());
  EXPECT_EQ(report->problems[0].array, "params.w");
  const std::string line = ToString(*report, report->problems[0]);
  EXPECT_NE(line.find("array `params.w`"), std::string::npos) << line;
  EXPECT_NE(ToJson(*report).find("\"ok\":false"), std::string::npos) << ToJson(*report);
}

TEST(InspectApi, ErrorsSayWhatWasBeingDone) {
  std::string what;
  auto listing = ListAddress("bogus://x/", &what);
  ASSERT_FALSE(listing.ok());
  EXPECT_NE(what.find("bogus://x/"), std::string::npos) << what;
  const std::string missing = TempDir("missing") + "/nothing";
  auto d = DescribeCheckpoint(missing);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().ToString().find("nothing"), std::string::npos) << d.status().ToString();
  auto v = VerifyCheckpoint(missing);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound) << v.status().ToString();
  auto run = DescribeEmergencyRun(SaveStep("no_emergency"));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_FALSE(run->has_value());
}

TEST(InspectApi, ListsKeysAndArrays) {
  const std::string step = SaveStep("keys");
  // The array's directory: one zarr array, its URL as the zarr driver reads it.
  auto array = ListAddress(step + "/params.w");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->kind, ListingKind::kArray);
  ASSERT_EQ(array->arrays.size(), 1u);
  EXPECT_EQ(array->arrays[0].path, "file://" + step + "/params.w/|zarr3:");
  EXPECT_EQ(array->arrays[0].chunks, (std::vector<int64_t>{2, 3}));
  // Its chunk directory: plain keys, sorted.
  auto keys = ListAddress(step + "/params.w/c");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->kind, ListingKind::kKeys);
  ASSERT_EQ(keys->keys.size(), 2u);
  EXPECT_LT(keys->keys[0].key, keys->keys[1].key);
  EXPECT_EQ(ToJson(*keys).rfind("[{\"bytes\":", 0), 0u) << ToJson(*keys);
}

TEST(ConvertApi, ConvertsAndDiffsThroughTheFrontDoor) {
  const std::vector<std::string> formats = ConvertDestinationFormats();
  for (const char* f : {"safetensors", "axlearn", "orbax"}) {
    EXPECT_NE(std::find(formats.begin(), formats.end(), f), formats.end()) << f;
  }
  const std::string step = SaveStep("convert");
  ConvertRequest r;
  r.source = step;
  r.dest = TempDir("convert_dest");
  r.to = "safetensors";
  size_t progress_calls = 0;
  r.progress = [&](const ConvertProgress& p) {
    ++progress_calls;
    EXPECT_LE(p.bytes_done, p.bytes_total);
  };
  auto result = Convert(r);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->source_format, "orbax");
  EXPECT_EQ(result->arrays, 1u);
  EXPECT_EQ(result->bytes_written, 48u);
  EXPECT_GT(progress_calls, 0u);
  auto listed = ListAddress(result->dest);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->format, "safetensors");
  EXPECT_NE(ToJson(*listed).find("\"format\":\"safetensors\""), std::string::npos);

  auto same = Diff(step, result->dest);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_TRUE(same->identical);
  auto other = Diff(step, SaveStep("convert_other", 0.5f));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE(other->identical);
  ASSERT_EQ(other->arrays.size(), 1u);
  EXPECT_EQ(other->arrays[0].num_different, 12u);
  EXPECT_DOUBLE_EQ(other->arrays[0].max_abs, 0.5);
  EXPECT_NE(ToJson(*other).find("\"identical\":false"), std::string::npos);
}

TEST(ConvertApi, RejectsAnUnknownCastDtypeByName) {
  ConvertRequest r;
  r.casts = {{"*", "bfloat16"}, {"params.*", "float33"}};
  Status s = ValidateConvertRequest(r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.ToString().find("float33"), std::string::npos) << s.ToString();
  r.source = SaveStep("bad_cast");
  r.dest = TempDir("bad_cast_dest");
  r.to = "safetensors";
  auto result = Convert(r);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().ToString().find("float33"), std::string::npos) << result.status().ToString();
  EXPECT_TRUE(fs::is_empty(r.dest));
}

}  // namespace
}  // namespace cairn
