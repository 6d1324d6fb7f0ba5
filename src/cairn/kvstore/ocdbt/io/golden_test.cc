// Decodes every TensorStore-written golden database in
// tests/testdata/tensorstore-written/ by reading its files directly. Missing
// data fails the test with the path (util/testing/testdata.h), never crashes.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "cairn/kvstore/ocdbt/format/manifest.h"
#include "cairn/kvstore/ocdbt/io/reader.h"
#include "cairn/util/testing/testdata.h"
#include "cairn/util/testing/file_bytes.h"

namespace cairn::ocdbt {
namespace {
using ::cairn::testing::ReadFileBytes;

namespace fs = std::filesystem;

using ::cairn::testing::TestdataPathOrFail;

// A ReadObjectFn over a directory of files.
ReadObjectFn DirReader(fs::path root) {
  return [root](const DataFileId& file, uint64_t offset, uint64_t length) -> Result<Buffer> {
    fs::path p = root / file.FullPath();
    if (!fs::exists(p)) return DataLossError("missing data file " + p.string());
    std::string all = ReadFileBytes(p);
    if (offset > all.size() || length > all.size() - offset) {
      return DataLossError("short read of " + p.string());
    }
    return Buffer::CopyOf(std::string_view(all).substr(offset, length));
  };
}

Manifest LoadManifest(const fs::path& db) {
  std::string bytes = ReadFileBytes(db / "manifest.ocdbt");
  auto m = DecodeManifest(AsBytes(bytes), (db / "manifest.ocdbt").string());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : Manifest{};
}

std::map<std::string, std::string> ListAll(const BtreeGenerationReference& root,
                                           const ReadObjectFn& read, std::string_view prefix = "") {
  std::map<std::string, std::string> out;
  std::string last;
  Status s = ListEntries(root, prefix, read, [&](std::string_view key, const LeafValue& v) {
    EXPECT_TRUE(out.empty() || std::string(key) > last) << "keys out of order at " << key;
    last = std::string(key);
    auto bytes = ReadValueRange(v, 0, v.size(), read);
    if (!bytes.ok()) return bytes.status();
    out[std::string(key)] = bytes->ToString();
    return Status::OK();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

std::map<std::string, std::string> ExpectedFiles(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).generic_string()] = ReadFileBytes(e.path());
  }
  return out;
}

void CheckFilesDatabase(const std::string& name) {
  auto golden = TestdataPathOrFail("tensorstore-written/ocdbt/" + name);
  auto files = TestdataPathOrFail("tensorstore-written/ocdbt/expected-files");
  ASSERT_TRUE(golden && files);
  const fs::path db = *golden;
  Manifest m = LoadManifest(db);
  ASSERT_EQ(m.versions.size(), 1u);
  auto read = DirReader(db);
  auto root = FindGeneration(m, 0, read);
  ASSERT_TRUE(root.ok() && root->has_value());
  auto expected = ExpectedFiles(*files);
  ASSERT_EQ(expected.size(), 8u);
  EXPECT_EQ(ListAll(**root, read), expected);
  EXPECT_EQ((*root)->root.statistics.num_keys, expected.size());
  for (const auto& [key, value] : expected) {
    auto v = FindKey(**root, key, read);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    ASSERT_TRUE(v->has_value()) << key;
    auto bytes = ReadValueRange(**v, 0, (*v)->size(), read);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes->ToString(), value) << key;
  }
  for (const char* absent : {"", "$", "a0", "baz", "baz/", "baz/y", "zz", "d", "\xff"}) {
    auto v = FindKey(**root, absent, read);
    ASSERT_TRUE(v.ok());
    EXPECT_FALSE(v->has_value()) << absent;
  }
  auto baz = ListAll(**root, read, "baz/");
  EXPECT_EQ(baz.size(), 3u);
  EXPECT_TRUE(baz.count("baz/first"));
  EXPECT_EQ(ListAll(**root, read, "b").size(), 4u);
  EXPECT_EQ(ListAll(**root, read, "q").size(), 0u);
}

TEST(OcdbtGoldenTest, FilesHighArity) {
  CheckFilesDatabase("files_high_arity.ocdbt");
  auto db = TestdataPathOrFail("tensorstore-written/ocdbt/files_high_arity.ocdbt");
  ASSERT_TRUE(db);
  Manifest m = LoadManifest(*db);
  ASSERT_EQ(m.versions.size(), 1u);
  EXPECT_EQ(m.config.max_inline_value_bytes, 100u);
  EXPECT_EQ(m.config.max_decoded_node_bytes, 8388608u);
  EXPECT_EQ(m.config.version_tree_arity_log2, 4);
  EXPECT_EQ(m.versions[0].root_height, 0);
  EXPECT_EQ(m.versions[0].root.location.length, 89u);
}

TEST(OcdbtGoldenTest, FilesMinArity) {
  CheckFilesDatabase("files_min_arity.ocdbt");
  auto db = TestdataPathOrFail("tensorstore-written/ocdbt/files_min_arity.ocdbt");
  ASSERT_TRUE(db);
  Manifest m = LoadManifest(*db);
  ASSERT_EQ(m.versions.size(), 1u);
  EXPECT_EQ(m.config.max_inline_value_bytes, 2u);
  EXPECT_EQ(m.config.max_decoded_node_bytes, 1u);
  EXPECT_EQ(m.versions[0].root_height, 3);
}

void CheckMultiVersion(const std::string& name) {
  auto golden = TestdataPathOrFail("tensorstore-written/ocdbt/" + name);
  ASSERT_TRUE(golden);
  const fs::path db = *golden;
  Manifest m = LoadManifest(db);
  ASSERT_EQ(m.latest_generation(), 200u);
  auto read = DirReader(db);
  for (uint64_t g = 1; g <= 200; ++g) {
    auto ref = FindGeneration(m, g, read);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    ASSERT_TRUE(ref->has_value()) << g;
    EXPECT_EQ((*ref)->generation_number, g);
    std::map<std::string, std::string> expected;
    for (uint64_t j = 1; j <= g; ++j) {
      expected["key" + std::to_string(j)] = "version " + std::to_string(j);
    }
    ASSERT_EQ(ListAll(**ref, read), expected) << "generation " << g;
    auto v = FindKey(**ref, "key" + std::to_string(g), read);
    ASSERT_TRUE(v.ok() && v->has_value());
    EXPECT_EQ((*v)->inline_value, "version " + std::to_string(g));
    auto absent = FindKey(**ref, "key" + std::to_string(g + 1), read);
    ASSERT_TRUE(absent.ok());
    EXPECT_FALSE(absent->has_value());
  }
  for (uint64_t g : {uint64_t{201}, uint64_t{1000}}) {
    auto ref = FindGeneration(m, g, read);
    ASSERT_TRUE(ref.ok());
    EXPECT_FALSE(ref->has_value());
  }
}

TEST(OcdbtGoldenTest, MultiVersionHighArity) {
  CheckMultiVersion("multi_version_high_arity.ocdbt");
  auto db = TestdataPathOrFail("tensorstore-written/ocdbt/multi_version_high_arity.ocdbt");
  ASSERT_TRUE(db);
  Manifest m = LoadManifest(*db);
  ASSERT_EQ(m.versions.size(), 8u);
  EXPECT_EQ(m.versions.front().generation_number, 193u);
  ASSERT_EQ(m.version_nodes.size(), 1u);
  EXPECT_EQ(m.version_nodes[0].height, 1);
  EXPECT_EQ(m.version_nodes[0].generation_number, 192u);
  EXPECT_EQ(m.version_nodes[0].num_generations, 192u);
}

TEST(OcdbtGoldenTest, MultiVersionLowArity) {
  CheckMultiVersion("multi_version_low_arity.ocdbt");
  auto db = TestdataPathOrFail("tensorstore-written/ocdbt/multi_version_low_arity.ocdbt");
  ASSERT_TRUE(db);
  Manifest m = LoadManifest(*db);
  ASSERT_EQ(m.versions.size(), 2u);
  EXPECT_EQ(m.versions.front().generation_number, 199u);
  std::vector<std::pair<int, uint64_t>> nodes;
  for (const auto& n : m.version_nodes) nodes.emplace_back(n.height, n.generation_number);
  std::vector<std::pair<int, uint64_t>> want = {{6, 128}, {5, 160}, {4, 176},
                                                {3, 192}, {2, 196}, {1, 198}};
  EXPECT_EQ(nodes, want);
}

TEST(OcdbtGoldenTest, Zarr3InOcdbtMatchesPlainFiles) {
  auto golden = TestdataPathOrFail("tensorstore-written/zarr3-in-ocdbt/simple_0.5.ocdbt");
  auto files = TestdataPathOrFail("tensorstore-written/zarr3-in-ocdbt/simple_0.5");
  ASSERT_TRUE(golden && files);
  Manifest m = LoadManifest(*golden);
  auto read = DirReader(*golden);
  auto root = FindGeneration(m, 0, read);
  ASSERT_TRUE(root.ok() && root->has_value());
  auto expected = ExpectedFiles(*files);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(ListAll(**root, read), expected);
}

// Without its data a golden test records failures naming the missing path
// and returns; it must not crash the binary (it once dereferenced an empty
// manifest). Control: the same check with the data present passes.
TEST(OcdbtGoldenTest, MissingDataFailsWithThePathInsteadOfCrashing) {
  {
    ::testing::TestPartResultArray results;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
      CheckFilesDatabase("no_such_database.ocdbt");
      CheckMultiVersion("no_such_database.ocdbt");
    }
    int missing = 0;
    for (int i = 0; i < results.size(); ++i) {
      const std::string message = results.GetTestPartResult(i).message();
      if (message.find("missing test data: ") != std::string::npos) {
        ++missing;
        EXPECT_NE(message.find("no_such_database.ocdbt"), std::string::npos) << message;
      }
    }
    EXPECT_EQ(missing, 2);  // one per helper call; both returned instead of crashing
  }
  ::testing::TestPartResultArray control;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &control);
    CheckFilesDatabase("files_high_arity.ocdbt");
  }
  EXPECT_EQ(control.size(), 0);
}

}  // namespace
}  // namespace cairn::ocdbt
