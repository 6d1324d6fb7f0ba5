// The S3 driver: SigV4 against AWS's published example, the credentials
// file, and the KvStore conformance suite against moto's S3 server (started
// once for this test binary on a free port, testing/emulator_server.h).
#include "cairn/kvstore/s3/s3_kvstore.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "cairn/kvstore/s3/aws_credentials.h"
#include "cairn/kvstore/s3/aws_shared_file.h"
#include "cairn/kvstore/s3/s3_multipart.h"
#include "cairn/kvstore/s3/s3_xml.h"
#include "cairn/kvstore/testing/conformance.h"
#include "cairn/kvstore/testing/emulator_server.h"
#include "cairn/kvstore/testing/emulator_store.h"
#include "cairn/kvstore/testing/get_into_check.h"
#include "cairn/kvstore/testing/list_children_check.h"
#include "cairn/kvstore/testing/own_write_check.h"
#include "cairn/kvstore/url.h"

namespace cairn::s3 {
namespace {

constexpr char kBucket[] = "cairn-conformance";

// A store on moto below a fresh prefix; small multipart sizes so that the
// suite's 20 MiB value goes up in parts. Null (with a test failure) when moto
// cannot be started.
std::shared_ptr<S3KvStore> MotoStore(std::string bucket = kBucket) {
  S3Options o;
  o.bucket = std::move(bucket);
  o.credentials = {"testing", "testing", "", "test"};
  o.multipart_threshold = 8 << 20;
  o.part_size = 5 << 20;
  return testing::OpenOnEmulator<S3KvStore>(o, MotoEndpoint());
}

const bool kRegistered = RegisterKvStoreConformanceTests(
    "S3MotoConformance", []() -> std::shared_ptr<KvStore> { return MotoStore(); });

TEST(SigV4Test, MatchesAwsGetObjectExample) {
  // The GET Object example of AWS's SigV4 documentation for S3.
  AwsCredentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", ""};
  SigV4Input in;
  in.method = "GET";
  in.canonical_uri = "/test.txt";
  in.headers = {{"host", "examplebucket.s3.amazonaws.com"},
                {"range", "bytes=0-9"},
                {"x-amz-content-sha256", std::string(kEmptySha256)},
                {"x-amz-date", "20130524T000000Z"}};
  in.payload_sha256 = std::string(kEmptySha256);
  in.amz_date = "20130524T000000Z";
  in.region = "us-east-1";
  EXPECT_EQ(SigV4Authorization(c, in),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  // Control: another secret gives another signature.
  c.secret_access_key = "other";
  EXPECT_EQ(SigV4Authorization(c, in).find("f0e8bdb87c964420"), std::string::npos);
  EXPECT_EQ(Sha256Hex(AsBytes("")), kEmptySha256);
}

TEST(AwsCredentialsTest, ParsesProfilesAndRejectsBrokenFiles) {
  std::string text =
      "# comment\n[default]\naws_access_key_id = AK1\naws_secret_access_key=SK1\n\n"
      "[profile other]\naws_access_key_id=AK2\naws_secret_access_key = SK2\naws_session_token=T\n";
  auto d = ParseAwsCredentialsFile(text, "/f", "default", false);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->access_key_id, "AK1");
  EXPECT_EQ(d->secret_access_key, "SK1");
  auto o = ParseAwsCredentialsFile(text, "/f", "other", true);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->session_token, "T");
  auto missing = ParseAwsCredentialsFile(text, "/f", "nope", false);
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->anonymous());
  auto required = ParseAwsCredentialsFile(text, "/f", "nope", true);
  EXPECT_EQ(required.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(required.status().message().find("/f"), std::string_view::npos);
  auto half = ParseAwsCredentialsFile("[default]\naws_access_key_id=AK\n", "/g", "default", false);
  EXPECT_EQ(half.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(half.status().message().find("aws_secret_access_key"), std::string_view::npos);
  auto garbage = ParseAwsCredentialsFile("[default\nx=y\n", "/h", "default", false);
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find("/h line 1"), std::string_view::npos)
      << garbage.status().ToString();
}

TEST(AwsSharedFileTest, ProfilesInBothSpellingsAndNestedSettingsSkipped) {
  const std::string text =
      "[default]\nregion = us-west-2\n; comment\n"
      "[profile eu]\nregion=eu-west-1\ns3 =\n  addressing_style = path\n  region = nested\n"
      "output = json\n[plain]\n  region = indented-but-not-nested\n";
  auto d = AwsFileProfile(text, "AWS config file", "/c", "default");
  ASSERT_TRUE(d.ok() && *d);
  EXPECT_EQ((**d)["region"], "us-west-2");
  auto eu = AwsFileProfile(text, "AWS config file", "/c", "eu");
  ASSERT_TRUE(eu.ok() && *eu);
  EXPECT_EQ((**eu)["region"], "eu-west-1") << "a nested `region` must not replace the profile's own";
  EXPECT_EQ((**eu)["output"], "json");
  EXPECT_EQ((**eu).count("addressing_style"), 0u);
  auto plain = AwsFileProfile(text, "AWS config file", "/c", "plain");
  ASSERT_TRUE(plain.ok() && *plain);
  EXPECT_EQ((**plain)["region"], "indented-but-not-nested");
  auto none = AwsFileProfile(text, "AWS config file", "/c", "nope");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto bad = AwsFileProfile("[default]\nregion\n", "AWS config file", "/c", "default");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "AWS config file /c line 2: expected `name = value`");
}

TEST(S3XmlTest, DecodesEntitiesAndRefusesMalformedOnes) {
  EXPECT_EQ(XmlDecode("a&amp;b&lt;&gt;&quot;&apos;&#65;&#x42;&#xe9;").value_or("?"),
            "a&b<>\"'AB\xc3\xa9");
  EXPECT_FALSE(XmlDecode("a&bogus;").has_value());
  EXPECT_FALSE(XmlDecode("a&#0;").has_value());
  EXPECT_FALSE(XmlDecode("a&amp").has_value());
  EXPECT_EQ(XmlText("<R><Key>a&amp;b</Key></R>", "Key").value_or("?"), "a&b");
  EXPECT_FALSE(XmlText("<R><Key>unterminated</R>", "Key").has_value());
  EXPECT_EQ(XmlElements("<C>1</C><C>2</C><C>3", "C").size(), 2u);
}

// MD5s of "hello" and "world!"; the expected ETag computed independently
// (Python's hashlib) as S3 does.
TEST(S3MultipartEtagTest, Md5OfThePartsMd5sAndTheirNumber) {
  EXPECT_EQ(MultipartEtag({"\"5d41402abc4b2a76b9719d911017c592\"", "08cf82251c975a5e9734699fadf5e9c0"})
                .value_or("?"),
            "d0e2a57660a3e97ebbae6b69b8c83b4a-2");
  EXPECT_FALSE(MultipartEtag({}).has_value());
  EXPECT_FALSE(MultipartEtag({"\"5d41402abc4b2a76b9719d911017c5\""}).has_value());  // short
  EXPECT_FALSE(MultipartEtag({"5d41402abc4b2a76b9719d911017c59z"}).has_value());    // not hex
}

TEST(S3KvStoreTest, KeysNeedingEscapingRoundTrip) {
  auto store = MotoStore();
  ASSERT_NE(store, nullptr);
  const std::vector<std::string> keys = {"a b/c+d", "pct%41/q?x=1#f", "amp&lt;/semi;colon",
                                         "uni/\xc3\xa9t\xc3\xa9", "tilde~/star*(1)", "eq=/ap'os\""};
  for (const std::string& k : keys) {
    ASSERT_TRUE(store->Put(k, AsBytes("v:" + k)).ok()) << k;
  }
  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(list->size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ((*list)[i].key, sorted[i]);
    auto v = store->Get(sorted[i]);
    ASSERT_TRUE(v.ok() && v->has_value()) << sorted[i];
    EXPECT_EQ((*v)->ToString(), "v:" + sorted[i]);
  }
}

TEST(S3KvStoreTest, MissingBucketIsNotFoundNamingIt) {
  auto good = MotoStore();
  ASSERT_NE(good, nullptr);
  S3Options o = good->options();
  o.bucket = "no-such-bucket-cairn";
  auto store = S3KvStore::Open(o);
  ASSERT_TRUE(store.ok());
  auto list = (*store)->List();
  EXPECT_EQ(list.status().code(), StatusCode::kNotFound) << list.status().ToString();
  EXPECT_NE(list.status().message().find("no-such-bucket-cairn"), std::string_view::npos);
  auto get = (*store)->Get("k");
  EXPECT_EQ(get.status().code(), StatusCode::kNotFound) << get.status().ToString();
  Status put = (*store)->Put("k", AsBytes("v"));
  EXPECT_FALSE(put.ok());
  EXPECT_NE(put.message().find("HTTP 404"), std::string_view::npos) << put.ToString();
  EXPECT_NE(put.message().find("/no-such-bucket-cairn/"), std::string_view::npos) << put.ToString();
  // Control: the same options on the real bucket work.
  EXPECT_TRUE(good->Put("k", AsBytes("v")).ok());
}

TEST(S3KvStoreTest, RefusedConnectionFailsAfterRetryBudgetNamingUrlAndOp) {
  S3Options o;
  o.bucket = "bucket";
  o.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  o.retry.max_attempts = 3;
  o.retry.initial_backoff = std::chrono::milliseconds(1);
  auto store = S3KvStore::Open(o);
  ASSERT_TRUE(store.ok());
  uint64_t before = (*store)->options().http->retries();
  Status s = (*store)->Put("dir/key", AsBytes("v"));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("writing key `dir/key` of s3://bucket/"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("PUT http://127.0.0.1:1/bucket/dir/key"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("after 3 attempts"), std::string_view::npos) << s.ToString();
  EXPECT_GE((*store)->options().http->retries() - before, 2u);
}

TEST(S3KvStoreTest, UrlOpensWithEnvironmentAndPipelines) {
  auto base = MotoStore();
  ASSERT_NE(base, nullptr);
  ASSERT_EQ(setenv("AWS_ENDPOINT_URL", base->options().endpoint.c_str(), 1), 0);
  ASSERT_EQ(setenv("AWS_ACCESS_KEY_ID", "testing", 1), 0);
  ASSERT_EQ(setenv("AWS_SECRET_ACCESS_KEY", "testing", 1), 0);
  std::string url = "s3://" + std::string(kBucket) + "/" + base->options().prefix;
  auto store = OpenKvStore(url + "plain/");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->url(), url + "plain/");
  ASSERT_TRUE((*store)->Put("x", AsBytes("1")).ok());
  auto direct = base->Get("plain/x");
  ASSERT_TRUE(direct.ok() && direct->has_value());
  EXPECT_EQ((*direct)->ToString(), "1");
  auto db = OpenKvStore(url + "db/|ocdbt:");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->Put("inner/key", AsBytes("value")).ok());
  auto again = OpenKvStore(url + "db/|ocdbt:inner/");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto v = (*again)->Get("key");
  ASSERT_TRUE(v.ok() && v->has_value()) << v.status().ToString();
  EXPECT_EQ((*v)->ToString(), "value");
  auto manifest = base->List("db/");
  ASSERT_TRUE(manifest.ok());
  EXPECT_FALSE(manifest->empty());
  for (const char* bad : {"s3://", "s3://A_B/x/", "s3://ab/", "s3://bucket/../x/"}) {
    auto r = OpenKvStore(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad << ": " << r.status().ToString();
  }
  unsetenv("AWS_ENDPOINT_URL");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
}

// A compare-and-put expecting this object's own last conditional write
// sends its ETag without reading first (testing/own_write_check.h).
TEST(S3KvStoreTest, CompareAndPutOfItsOwnWriteSkipsTheRead) {
  auto a = MotoStore();
  ASSERT_NE(a, nullptr);
  auto b = S3KvStore::Open(a->options());  // another writer of the same keys
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  http::HttpClient& client = *a->options().http;
  testing::ExpectCompareAndPutOfItsOwnWriteSkipsTheRead(*a, **b, [&] { return client.calls(); });
}

}  // namespace
}  // namespace cairn::s3

namespace cairn::s3 {
namespace {

// GetInto has libcurl write the object into the caller's memory
// (testing/get_into_check.h).
TEST(S3KvStoreTest, GetIntoWritesTheObjectInPlaceWithoutABuffer) {
  auto store = MotoStore();
  ASSERT_NE(store, nullptr);
  http::HttpClient& client = *store->options().http;
  testing::ExpectGetIntoWritesTheObjectInPlace(*store, [&] { return client.calls(); });
}

// ListChildren is one listing with delimiter '/': a page per 5 children
// here, not per 5 keys below them (testing/list_children_check.h).
TEST(S3KvStoreTest, ListChildrenIsOneDelimitedListing) {
  auto seed = MotoStore();
  ASSERT_NE(seed, nullptr);
  auto o = seed->options();
  o.list_page_size = 5;
  auto store = S3KvStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  http::HttpClient& client = *(*store)->options().http;
  testing::ExpectListChildrenIsOneDelimitedListing(**store, 5, [&] { return client.calls(); });
}

}  // namespace
}  // namespace cairn::s3
