#include "cairn/kvstore/url.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "cairn/kvstore/memory/memory_kvstore.h"

namespace cairn {
namespace {

TEST(UrlTest, SplitPipeline) {
  auto parts = SplitUrlPipeline("file:///a/|ocdbt:p/|zarr3:");
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(*parts, (std::vector<std::string>{"file:///a/", "ocdbt:p/", "zarr3:"}));
  auto one = SplitUrlPipeline("memory://");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<std::string>{"memory://"}));
  for (const char* bad : {"", "|", "file:///a/|", "|ocdbt:", "memory://||ocdbt:"}) {
    auto r = SplitUrlPipeline(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(UrlTest, MemoryUrlsShareTheDefaultStore) {
  auto a = OpenKvStore("memory://url_test/x/");
  auto b = OpenKvStore("memory://url_test/x");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*a)->url(), "memory://url_test/x/");
  ASSERT_TRUE((*a)->Put("k", AsBytes("v")).ok());
  auto r = (*b)->Get("k");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->ToString(), "v");
  auto root = OpenKvStore("memory://");
  ASSERT_TRUE(root.ok());
  auto r2 = (*root)->Get("url_test/x/k");
  ASSERT_TRUE(r2.ok() && r2->has_value());
  auto spaced = OpenKvStore("memory://url_test/a%20b/");
  ASSERT_TRUE(spaced.ok());
  ASSERT_TRUE((*spaced)->Put("k", AsBytes("s")).ok());
  auto r3 = MemoryKvStore::Default()->Get("url_test/a b/k");
  ASSERT_TRUE(r3.ok() && r3->has_value());
  ASSERT_TRUE(MemoryKvStore::Default()->DeletePrefix("url_test/").ok());
}

TEST(UrlTest, FileUrl) {
  std::string dir = "/tmp/cairn_url_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  auto store = OpenKvStore("file://" + dir + "/sub%25dir/");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->url(), "file://" + dir + "/sub%dir/");
  ASSERT_TRUE((*store)->Put("a/b", AsBytes("v")).ok());
  std::ifstream in(dir + "/sub%dir/a/b");
  std::string content;
  in >> content;
  EXPECT_EQ(content, "v");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(UrlTest, Errors) {
  struct Case {
    const char* url;
    const char* mentions;
  };
  for (const Case& c : {Case{"gopher://x/", "gopher"}, Case{"file://relative/path", "absolute"},
                        Case{"file:/abs", "scheme"}, Case{"memory://a/|nope:x", "nope"},
                        Case{"memory://|zarr3:", "zarr3"}, Case{"memory://a/../b/", ".."},
                        Case{"memory://a%2", "escape"}, Case{"memory://a%zz/", "escape"},
                        Case{"memory://a%00b/", "%00"}, Case{"file:///a//b/", "empty"},
                        Case{"file:///a/?x=1", "query"}, Case{"nocolon", "scheme"},
                        Case{"memory://a/|:x", "adapter"}}) {
    auto r = OpenKvStore(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_NE(r.status().message().find(c.mentions), std::string_view::npos)
        << c.url << ": " << r.status().ToString();
  }
}

TEST(UrlTest, UrlPathToKeyPrefix) {
  auto p = UrlPathToKeyPrefix("a/b", "u");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "a/b/");
  auto e = UrlPathToKeyPrefix("", "u");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, "");
  EXPECT_FALSE(UrlPathToKeyPrefix("/abs/", "u").ok());
}

TEST(UrlTest, OcdbtAdapterOverMemoryAndPrefix) {
  auto db = OpenKvStore("memory://url_test_ocdbt/|ocdbt:");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->Put("params.w/zarr.json", AsBytes("{}")).ok());
  auto sub = OpenKvStore("memory://url_test_ocdbt/|ocdbt:params.w/");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  auto v = (*sub)->Get("zarr.json");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->ToString(), "{}");
  // The database lives in the base store as a manifest plus data files.
  auto base = OpenKvStore("memory://url_test_ocdbt/");
  ASSERT_TRUE(base.ok());
  auto m = (*base)->Get("manifest.ocdbt");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((*sub)->url(), "memory://url_test_ocdbt/|ocdbt:params.w/");
}

}  // namespace
}  // namespace cairn
