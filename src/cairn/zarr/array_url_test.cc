#include "cairn/zarr/array_url.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cairn/kvstore/url.h"

namespace cairn {
namespace {

struct ParseCase {
  const char* url;
  const char* kvstore_url;
  std::optional<ZarrFormat> format;
};

// Expected values are what tensorstore 0.1.86 resolves these URLs to
// (ts.Spec(url).to_json()), written back as cairn kvstore URLs.
TEST(ParseArrayUrlTest, MatchesTensorStore) {
  const ParseCase cases[] = {
      {"file:///tmp/a/|zarr3:", "file:///tmp/a/", ZarrFormat::kV3},
      {"file:///tmp/a|zarr3:", "file:///tmp/a/", ZarrFormat::kV3},
      {"file:///tmp|zarr3:e", "file:///tmp/e/", ZarrFormat::kV3},
      {"file:///tmp/|zarr3:f", "file:///tmp/f/", ZarrFormat::kV3},
      {"file:///tmp/g|zarr3:h/", "file:///tmp/g/h/", ZarrFormat::kV3},
      {"file:///tmp/|zarr3://x", "file:///tmp/x/", ZarrFormat::kV3},
      {"file:///tmp/|zarr3:/x", "file:///tmp//x/", ZarrFormat::kV3},
      {"memory://|zarr3:", "memory://", ZarrFormat::kV3},
      {"memory://|zarr3:q", "memory://q/", ZarrFormat::kV3},
      {"memory://a/b|zarr2:", "memory://a/b/", ZarrFormat::kV2},
      {"file:///tmp/|zarr2:k/", "file:///tmp/k/", ZarrFormat::kV2},
      {"file:///db/|ocdbt:p.w/|zarr3:", "file:///db/|ocdbt:p.w/", ZarrFormat::kV3},
      {"file:///db/|ocdbt:p.w|zarr3:", "file:///db/|ocdbt:p.w/", ZarrFormat::kV3},
      {"file:///db/|ocdbt:|zarr3:p.q/", "file:///db/|ocdbt:p.q/", ZarrFormat::kV3},
      {"file:///db/|ocdbt:", "file:///db/|ocdbt:", std::nullopt},
      // Without a driver part the kvstore URL stays as written.
      {"file:///tmp/a", "file:///tmp/a", std::nullopt},
      {"file:///tmp/a/", "file:///tmp/a/", std::nullopt},
      {"memory://a/b", "memory://a/b", std::nullopt},
  };
  for (const ParseCase& c : cases) {
    auto parsed = ParseArrayUrl(c.url);
    ASSERT_TRUE(parsed.ok()) << c.url << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->kvstore_url, c.kvstore_url) << c.url;
    EXPECT_EQ(parsed->format, c.format) << c.url;
  }
}

TEST(ParseArrayUrlTest, RejectsWhatTensorStoreRejects) {
  for (const char* url : {"", "zarr3:", "file:///tmp/|zarr3:x?y", "file:///tmp/|zarr3:a#b",
                          "file:///tmp/|zarr3:|zarr3:", "file:///tmp/|zarr3:|ocdbt:"}) {
    auto parsed = ParseArrayUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << url;
  }
  auto parsed = ParseArrayUrl("file:///tmp/|zarr3:x?y");
  EXPECT_NE(parsed.status().message().find("file:///tmp/|zarr3:x?y"), std::string_view::npos);
}

// TensorStore 0.1.86: "URL scheme must be specified" / "unsupported URL
// scheme" for a bare path, with or without a driver part.
TEST(ParseArrayUrlTest, BarePathsAreNotUrls) {
  for (const char* url : {"/tmp/a", "/tmp/a/", "/tmp/a/|zarr2:", "/tmp/a|zarr3:", "rel/dir",
                          "/db/|ocdbt:p/|zarr3:"}) {
    auto parsed = ParseArrayUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(parsed.status().message().find("has no URL scheme"), std::string_view::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(url), std::string_view::npos);
    // Control: the same path as NormalizeUrl writes it parses.
    auto normalized = ParseArrayUrl(NormalizeUrl(url));
    EXPECT_TRUE(normalized.ok()) << NormalizeUrl(url) << ": " << normalized.status().ToString();
  }
}

TEST(NormalizeUrlTest, PathsBecomeFileUrls) {
  EXPECT_EQ(NormalizeUrl("file:///x/"), "file:///x/");
  EXPECT_EQ(NormalizeUrl("memory://x/|zarr3:"), "memory://x/|zarr3:");
  EXPECT_EQ(NormalizeUrl("/a/b/"), "file:///a/b/");
  EXPECT_EQ(NormalizeUrl("/a/./b/../c"), "file:///a/c");
  EXPECT_EQ(NormalizeUrl("/a/b%c#d"), "file:///a/b%25c%23d");
  EXPECT_EQ(NormalizeUrl("/db/|ocdbt:x/|zarr3:"), "file:///db/|ocdbt:x/|zarr3:");
  std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(NormalizeUrl("rel/dir/"), "file://" + cwd + "/rel/dir/");
}

Json SmallV3() {
  return Json::parse(R"({"shape":[5,3],"data_type":"int16",
      "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,2]}}})");
}

TEST(ArrayUrlTest, CreateOpenRoundTripInMemory) {
  auto created = CreateZarrArray("memory://array_url_test/rt/|zarr3:", SmallV3());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  int16_t values[15];
  for (int i = 0; i < 15; ++i) values[i] = static_cast<int16_t>(i * 7 - 40);
  ASSERT_TRUE((*created)->Write(Box::FromShape({5, 3}), values).ok());

  // With the driver, and detected without it.
  for (const char* url : {"memory://array_url_test/rt/|zarr3:", "memory://array_url_test/rt/",
                          "memory://array_url_test/|zarr3:rt", "memory://array_url_test/rt"}) {
    auto opened = OpenZarrArray(url);
    ASSERT_TRUE(opened.ok()) << url << ": " << opened.status().ToString();
    EXPECT_EQ((*opened)->metadata().format, ZarrFormat::kV3);
    EXPECT_EQ((*opened)->shape(), (Shape{5, 3}));
    int16_t back[15] = {};
    ASSERT_TRUE((*opened)->Read(Box::FromShape({5, 3}), back).ok());
    EXPECT_EQ(std::memcmp(back, values, sizeof(values)), 0) << url;
  }
  // Asking for the other format finds nothing.
  auto wrong = OpenZarrArray("memory://array_url_test/rt/|zarr2:");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kNotFound);
}

TEST(ArrayUrlTest, DetectsV2AndUsesZarrFormatMember) {
  Json md = Json::parse(R"({"zarr_format":2,"shape":[4],"chunks":[3],"dtype":"<f8",
                            "compressor":null})");
  auto created = CreateZarrArray("memory://array_url_test/v2/", md);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto store = OpenKvStore("memory://array_url_test/v2/");
  ASSERT_TRUE(store.ok());
  auto zarray = (*store)->Get(".zarray");
  ASSERT_TRUE(zarray.ok());
  EXPECT_TRUE(zarray->has_value());
  auto opened = OpenZarrArray("memory://array_url_test/v2/");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->metadata().format, ZarrFormat::kV2);
  EXPECT_EQ((*opened)->dtype(), DType::kFloat64);
}

TEST(ArrayUrlTest, CreateNeedsAFormatAndAgreement) {
  auto no_format = CreateZarrArray("memory://array_url_test/nf/", SmallV3());
  ASSERT_FALSE(no_format.ok());
  EXPECT_EQ(no_format.status().code(), StatusCode::kInvalidArgument);

  Json v2 = SmallV3();
  v2["zarr_format"] = 2;
  auto disagree = CreateZarrArray("memory://array_url_test/dis/|zarr3:", v2);
  ASSERT_FALSE(disagree.ok());
  EXPECT_EQ(disagree.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(disagree.status().message().find("memory://array_url_test/dis/|zarr3:"),
            std::string_view::npos);
}

TEST(ArrayUrlTest, MissingArrayIsNotFoundNamingTheUrl) {
  auto opened = OpenZarrArray("memory://array_url_test/none/|zarr3:");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  EXPECT_NE(opened.status().message().find("memory://array_url_test/none/|zarr3:"),
            std::string_view::npos);
}

// A plain path is not an array URL (as in TensorStore); NormalizeUrl makes
// it one. Without a driver part the URL need not end in '/'.
TEST(ArrayUrlTest, FileUrlFromPlainPath) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "cairn-array-url-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  std::string dir = tmpl + "/arr";
  auto bare = CreateZarrArray(dir + "|zarr3:", SmallV3());
  EXPECT_EQ(bare.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir));
  auto created = CreateZarrArray(NormalizeUrl(dir + "|zarr3:"), SmallV3());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(dir + "/zarr.json"));
  EXPECT_EQ(OpenZarrArray(dir).status().code(), StatusCode::kInvalidArgument);
  for (const std::string& url : {"file://" + dir, "file://" + dir + "/"}) {
    auto opened = OpenZarrArray(url);
    ASSERT_TRUE(opened.ok()) << url << ": " << opened.status().ToString();
    EXPECT_EQ((*opened)->shape(), (Shape{5, 3}));
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace cairn
