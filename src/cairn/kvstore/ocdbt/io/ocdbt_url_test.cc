// TensorStore's URL syntax for older OCDBT generations, `<base>|ocdbt:@v5/`:
// parsed to the same meaning, printed the same way, and every version cairn
// cannot read is an error rather than a key prefix.
#include <gtest/gtest.h>

#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/url.h"

namespace cairn {
namespace {

std::string GetStr(KvStore& s, std::string_view key) {
  auto r = s.Get(key);
  if (!r.ok()) return "<error " + r.status().ToString() + ">";
  if (!r->has_value()) return "<missing>";
  return (*r)->ToString();
}

// Three generations: x = 1, 2, 3 and sub/y = 10, 20, 30.
void WriteThreeGenerations(const std::string& root) {
  auto db = OpenKvStore(root + "|ocdbt:");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  for (int g = 1; g <= 3; ++g) {
    std::vector<KvMutation> batch;
    batch.push_back({"x", Buffer::CopyOf(std::to_string(g))});
    batch.push_back({"sub/y", Buffer::CopyOf(std::to_string(10 * g))});
    ASSERT_TRUE((*db)->ApplyBatch(std::move(batch)).ok());
  }
}

TEST(OcdbtUrlTest, AtVersionReadsThatGeneration) {
  const std::string root = "memory://ocdbt_url_gen/";
  WriteThreeGenerations(root);
  auto latest = OpenKvStore(root + "|ocdbt:");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(GetStr(**latest, "x"), "3");  // control: no version = the latest
  for (int g = 1; g <= 3; ++g) {
    std::string url = root + "|ocdbt:@v" + std::to_string(g) + "/";
    auto db = OpenKvStore(url);
    ASSERT_TRUE(db.ok()) << url << ": " << db.status().ToString();
    EXPECT_EQ(GetStr(**db, "x"), std::to_string(g)) << url;
    EXPECT_EQ((*db)->url(), url);
    // With a path after the version.
    auto sub = OpenKvStore(url + "sub/");
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    EXPECT_EQ(GetStr(**sub, "y"), std::to_string(10 * g));
    EXPECT_EQ((*sub)->url(), url + "sub/");
  }
  // Leading zeros and no trailing slash mean the same; printed canonically.
  for (const char* same : {"@v02/", "@v2", "@v002/"}) {
    auto db = OpenKvStore(root + "|ocdbt:" + same);
    ASSERT_TRUE(db.ok()) << same << ": " << db.status().ToString();
    EXPECT_EQ(GetStr(**db, "x"), "2") << same;
    EXPECT_EQ((*db)->url(), root + "|ocdbt:@v2/") << same;
  }
  // A fixed generation is read-only.
  auto old = OpenKvStore(root + "|ocdbt:@v1/");
  ASSERT_TRUE(old.ok());
  Status st = (*old)->Put("x", AsBytes("9"));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("opened at generation 1 (read-only)"), std::string::npos)
      << st.ToString();
  // A generation the database does not have.
  auto missing = OpenKvStore(root + "|ocdbt:@v9/");
  ASSERT_TRUE(missing.ok());
  auto got = (*missing)->Get("x");
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << got.status().ToString();
  EXPECT_NE(got.status().message().find("generation 9 is not present"), std::string::npos);
}

TEST(OcdbtUrlTest, EscapedAtIsAKeyPrefix) {
  const std::string root = "memory://ocdbt_url_at/";
  auto db = OpenKvStore(root + "|ocdbt:");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Put("@v1/k", AsBytes("literal")).ok());
  ASSERT_TRUE((*db)->Put("k", AsBytes("plain")).ok());
  auto escaped = OpenKvStore(root + "|ocdbt:%40v1/");
  ASSERT_TRUE(escaped.ok()) << escaped.status().ToString();
  EXPECT_EQ(GetStr(**escaped, "k"), "literal");
  EXPECT_EQ((*escaped)->url(), root + "|ocdbt:%40v1/");
  auto version = OpenKvStore(root + "|ocdbt:@v1/");  // control: generation 1
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(GetStr(**version, "@v1/k"), "literal");
  EXPECT_EQ(GetStr(**version, "k"), "<missing>");
  // An '@' later in the path is an ordinary key character, printed as %40.
  auto later = OpenKvStore(root + "|ocdbt:a/@v5/");
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ((*later)->url(), root + "|ocdbt:a/%40v5/");
}

TEST(OcdbtUrlTest, VersionsCairnCannotReadAreErrors) {
  const std::string root = "memory://ocdbt_url_bad/|ocdbt:";
  struct Case {
    const char* version;
    StatusCode code;
    const char* message;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"@v0/", StatusCode::kInvalidArgument, "invalid OCDBT generation number `v0`"},
           {"@v5a/", StatusCode::kInvalidArgument, "invalid OCDBT generation number `v5a`"},
           {"@v+5/", StatusCode::kInvalidArgument, "invalid OCDBT generation number `v+5`"},
           {"@v/", StatusCode::kInvalidArgument, "invalid OCDBT generation number `v`"},
           {"@v18446744073709551616/", StatusCode::kInvalidArgument,
            "invalid OCDBT generation number"},
           {"@x/", StatusCode::kInvalidArgument, "invalid OCDBT version `x`"},
           {"@V5/", StatusCode::kInvalidArgument, "invalid OCDBT version `V5`"},
           {"@/", StatusCode::kInvalidArgument, "invalid OCDBT version ``"},
           {"@", StatusCode::kInvalidArgument, "invalid OCDBT version ``"},
           {"@2020-01-01T00:00:00Z/", StatusCode::kUnimplemented,
            "commit-time versions (`@2020-01-01T00:00:00Z/`) are not supported"},
       }) {
    auto db = OpenKvStore(root + c.version);
    ASSERT_FALSE(db.ok()) << c.version;
    EXPECT_EQ(db.status().code(), c.code) << c.version << ": " << db.status().ToString();
    EXPECT_NE(db.status().message().find(c.message), std::string::npos)
        << c.version << ": " << db.status().ToString();
    EXPECT_NE(db.status().message().find(std::string("ocdbt:") + c.version), std::string::npos)
        << "the message quotes the URL: " << db.status().ToString();
  }
  // Control: the largest generation number parses.
  auto max = OpenKvStore(root + "@v18446744073709551615/");
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  EXPECT_EQ((*max)->url(), root + "@v18446744073709551615/");
}

}  // namespace
}  // namespace cairn
