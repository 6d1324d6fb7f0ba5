// Temporary AWS credentials: parsing what STS, the container endpoint and
// EC2 instance metadata answer (and refusing malformed answers), the
// provider's refresh rules on a clock the test drives, the chain's choices
// from the environment, and an S3 store on moto signing with credentials
// that change when the old ones expire.
#include "cairn/kvstore/s3/aws_credential_provider.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "cairn/kvstore/s3/aws_credentials.h"
#include "cairn/kvstore/s3/aws_instance_metadata.h"
#include "cairn/kvstore/s3/aws_web_identity.h"
#include "cairn/kvstore/s3/s3_kvstore.h"
#include "cairn/kvstore/testing/emulator_server.h"

namespace cairn::s3 {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

WallClock::time_point At(int64_t unix_seconds) { return WallClock::from_time_t(unix_seconds); }

TEST(AwsTimestampTest, ParsesTheFormsAwsSendsAndRefusesOthers) {
  // 2026-12-04T10:18:32Z is 1796379512.
  EXPECT_EQ(*ParseAwsTimestamp("2026-12-04T10:18:32Z", "t"), At(1796379512));
  EXPECT_EQ(*ParseAwsTimestamp("2026-12-04T10:18:32.678740Z", "t"), At(1796379512));
  EXPECT_EQ(*ParseAwsTimestamp("2026-12-04T12:18:32+02:00", "t"), At(1796379512));
  EXPECT_EQ(*ParseAwsTimestamp("2026-12-04T09:18:32-01:00", "t"), At(1796379512));
  EXPECT_EQ(*ParseAwsTimestamp("1970-01-01T00:00:00Z", "t"), At(0));
  for (const char* bad : {"", "2026-12-04", "2026-12-04T10:18:32", "2026-13-04T10:18:32Z",
                          "2026-12-32T10:18:32Z", "2026-12-04T24:00:00Z", "2026-12-04T10:18:32.Z",
                          "2026-12-04T10:18:32Zjunk", "2026-12-04X10:18:32Z", "20x6-12-04T10:18:32Z",
                          "2026-12-04T10:18:32+2:00", "1969-12-31T23:59:59Z"}) {
    Result<WallClock::time_point> t = ParseAwsTimestamp(bad, "field `Expiration`");
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(t.status().message().find("field `Expiration`"), std::string_view::npos);
  }
}

TEST(AwsCredentialsJsonTest, ParsesContainerAndImdsAnswers) {
  Result<ExpiringAwsCredentials> c = ParseAwsCredentialsJson(
      R"({"Code":"Success","LastUpdated":"2026-12-04T09:00:00Z","Type":"AWS-HMAC",)"
      R"("AccessKeyId":"ASIA1","SecretAccessKey":"s/1+","Token":"tok==","Expiration":"2026-12-04T10:18:32Z"})",
      "IMDS");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "ASIA1");
  EXPECT_EQ(c->credentials.secret_access_key, "s/1+");
  EXPECT_EQ(c->credentials.session_token, "tok==");
  EXPECT_EQ(c->expiration, At(1796379512));
  // The container endpoint sends no Code.
  c = ParseAwsCredentialsJson(
      R"({"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-12-04T10:18:32Z","RoleArn":"r"})",
      "ECS");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
}

TEST(AwsCredentialsJsonTest, MalformedAnswersAreClearErrors) {
  struct Case {
    const char* json;
    StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {"", StatusCode::kDataLoss, "not a JSON object"},
      {"{\"AccessKeyId\":", StatusCode::kDataLoss, "not a JSON object"},
      {"[1,2]", StatusCode::kDataLoss, "not a JSON object"},
      {R"({"SecretAccessKey":"S","Token":"T","Expiration":"2026-12-04T10:18:32Z"})", StatusCode::kDataLoss,
       "`AccessKeyId` is missing"},
      {R"({"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"2026-12-04T10:18:32Z"})",
       StatusCode::kDataLoss, "`Token` is missing"},
      {R"({"AccessKeyId":"A","SecretAccessKey":7,"Token":"T","Expiration":"2026-12-04T10:18:32Z"})",
       StatusCode::kDataLoss, "`SecretAccessKey` is missing or not a non-empty string"},
      {R"({"AccessKeyId":"A","SecretAccessKey":"S","Token":"T"})", StatusCode::kDataLoss,
       "`Expiration` is missing"},
      {R"({"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"tomorrow"})",
       StatusCode::kDataLoss, "`tomorrow` is not a timestamp"},
      {R"({"Code":"AssumeRoleUnauthorizedAccess","Message":"no trust"})", StatusCode::kFailedPrecondition,
       "Code is \"AssumeRoleUnauthorizedAccess\": no trust"},
  };
  for (const Case& c : cases) {
    Result<ExpiringAwsCredentials> r = ParseAwsCredentialsJson(c.json, "GET http://x/creds");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), c.code) << c.json << " " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.says), std::string_view::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("GET http://x/creds"), std::string_view::npos);
  }
}

TEST(WebIdentityTest, ParsesStsAnswerAndRefusesMalformedOnes) {
  const std::string ok =
      "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
      "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAX</AccessKeyId>"
      "<SecretAccessKey>a&amp;b/c+</SecretAccessKey><SessionToken>FQo=</SessionToken>"
      "<Expiration>2026-12-04T10:18:32.678740Z</Expiration></Credentials>"
      "<AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/s</Arn></AssumedRoleUser>"
      "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
  Result<ExpiringAwsCredentials> c = ParseStsCredentials(ok, "STS");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "ASIAX");
  EXPECT_EQ(c->credentials.secret_access_key, "a&b/c+");
  EXPECT_EQ(c->credentials.session_token, "FQo=");
  EXPECT_EQ(c->expiration, At(1796379512));

  auto without = [&](const std::string& tag) {
    std::string s = ok;
    size_t a = s.find("<" + tag + ">");
    size_t b = s.find("</" + tag + ">");
    return s.erase(a, b + tag.size() + 3 - a);
  };
  struct Case {
    std::string xml;
    const char* says;
  };
  std::string bad_time = ok;
  bad_time.replace(bad_time.find("2026-12-04T10"), 4, "20x6");
  const Case cases[] = {
      {"", "0 <Credentials> elements"},
      {"<html>not xml", "0 <Credentials> elements"},
      {without("SessionToken"), "no <SessionToken>"},
      {without("AccessKeyId"), "no <AccessKeyId>"},
      {without("Expiration"), "no <Expiration>"},
      {bad_time, "is not a timestamp"},
      {ok + ok, "2 <Credentials> elements"},
  };
  for (const Case& c : cases) {
    Result<ExpiringAwsCredentials> r = ParseStsCredentials(c.xml, "STS at http://s/");
    ASSERT_FALSE(r.ok()) << c.xml;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.says), std::string_view::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("STS at http://s/"), std::string_view::npos);
  }
}

// A provider over a clock and a fetch function the test drives.
struct Driven {
  std::atomic<int64_t> now{1796379512};
  std::atomic<int> calls{0};
  // What the next fetch answers: credentials "k<calls>" valid for `lifetime`
  // seconds, or `fail`.
  std::atomic<int64_t> lifetime{3600};
  std::atomic<bool> fail{false};
  std::shared_ptr<AwsCredentialProvider> provider = std::make_shared<AwsCredentialProvider>(
      "the test's source",
      [this]() -> Result<ExpiringAwsCredentials> {
        int n = ++calls;
        if (fail) return UnavailableError("source down (HTTP 503)");
        ExpiringAwsCredentials c;
        c.credentials = {"k" + std::to_string(n), "s", "t", "test"};
        c.expiration = At(now + lifetime);
        return c;
      },
      [this] { return At(now); });
  std::string Key() {
    Result<AwsCredentials> c = provider->Get();
    return c.ok() ? c->access_key_id : "error: " + c.status().ToString();
  }
};

TEST(AwsCredentialProviderTest, CachesAndRefreshesFiveMinutesBeforeExpiry) {
  Driven d;
  EXPECT_EQ(d.Key(), "k1");
  EXPECT_EQ(d.Key(), "k1");
  d.now += 3600 - 301;  // 5 min + 1 s left: still cached
  EXPECT_EQ(d.Key(), "k1");
  EXPECT_EQ(d.calls, 1);
  d.now += 2;  // 4 min 59 s left: refreshed
  EXPECT_EQ(d.Key(), "k2");
  EXPECT_EQ(d.Key(), "k2");
  EXPECT_EQ(d.calls, 2);
  EXPECT_EQ(d.provider->fetches(), 2u);
}

TEST(AwsCredentialProviderTest, ShortLivedCredentialsRefreshAtHalfTheirLifetime) {
  Driven d;
  d.lifetime = 60;
  EXPECT_EQ(d.Key(), "k1");
  d.now += 29;
  EXPECT_EQ(d.Key(), "k1");
  d.now += 1;
  EXPECT_EQ(d.Key(), "k2");
}

TEST(AwsCredentialProviderTest, FailedRefreshKeepsValidCredentialsThenErrorsAfterExpiry) {
  Driven d;
  EXPECT_EQ(d.Key(), "k1");
  d.now += 3600 - 200;  // due
  d.fail = true;
  EXPECT_EQ(d.Key(), "k1");  // the refresh failed: the old ones still work
  EXPECT_EQ(d.calls, 2);
  EXPECT_EQ(d.Key(), "k1");  // not tried again at once
  EXPECT_EQ(d.calls, 2);
  d.now += AwsCredentialProvider::kRetryAfterFailure.count();
  EXPECT_EQ(d.Key(), "k1");  // tried again, failed again
  EXPECT_EQ(d.calls, 3);
  d.now += 200;  // expired
  std::string e = d.Key();
  EXPECT_NE(e.find("Unavailable"), std::string::npos) << e;
  EXPECT_NE(e.find("the test's source"), std::string::npos) << e;
  EXPECT_NE(e.find("expired at 2026-12-04T11:18:32Z"), std::string::npos) << e;
  EXPECT_NE(e.find("HTTP 503"), std::string::npos) << e;
  EXPECT_EQ(d.provider->failures(), 3u);
  d.fail = false;  // recovers
  EXPECT_EQ(d.Key(), "k5");
}

TEST(AwsCredentialProviderTest, FirstFetchFailingIsAnErrorAndAlreadyExpiredAnswersAreRefused) {
  Driven d;
  d.fail = true;
  std::string e = d.Key();
  EXPECT_NE(e.find("getting AWS credentials from the test's source"), std::string::npos) << e;
  EXPECT_EQ(d.provider->Current(), std::nullopt);
  d.fail = false;
  d.lifetime = 0;
  e = d.Key();
  EXPECT_NE(e.find("arrived already expired"), std::string::npos) << e;
  d.lifetime = 3600;
  EXPECT_EQ(d.Key(), "k3");
}

TEST(AwsCredentialProviderTest, ConcurrentCallersOfExpiredCredentialsShareOneFetch) {
  Driven d;
  EXPECT_EQ(d.Key(), "k1");
  d.now += 4000;
  std::vector<std::thread> threads;
  std::atomic<int> k2{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&] {
      if (d.Key() == "k2") ++k2;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(k2, 16);
  EXPECT_EQ(d.calls, 2);
}

TEST(AwsCredentialProviderTest, FixedCredentialsNeverExpire) {
  auto p = AwsCredentialProvider::Fixed({"id", "secret", "", "environment"});
  EXPECT_FALSE(p->anonymous());
  EXPECT_EQ(p->Get()->access_key_id, "id");
  EXPECT_EQ(p->description(), "environment");
  EXPECT_TRUE(AwsCredentialProvider::Fixed({})->anonymous());
}

// Sets variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name :
         {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
          "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
          "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
          "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
          "AWS_EC2_METADATA_DISABLED", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"}) {
      if (const char* v = getenv(name)) saved_.emplace_back(name, v);
      unsetenv(name);
      names_.push_back(name);
    }
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/cairn-test-credentials", 1);
    for (auto [k, v] : vars) setenv(k, v, 1);
  }
  ~ScopedEnv() {
    for (const char* n : names_) unsetenv(n);
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::vector<const char*> names_;
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(AwsCredentialChainTest, PicksTheSourceTheEnvironmentNames) {
  {
    ScopedEnv env({{"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"}});
    Result<std::shared_ptr<AwsCredentialProvider>> p = AwsCredentialProviderFromEnvironment(false, "");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("AWS_ROLE_ARN"), std::string_view::npos);
  }
  {
    ScopedEnv env({{"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"},
                   {"AWS_ROLE_ARN", "arn:aws:iam::1:role/r"},
                   {"AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9/"}});
    auto p = AwsCredentialProviderFromEnvironment(false, "eu-west-1");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_NE((*p)->description().find("role arn:aws:iam::1:role/r"), std::string::npos);
    EXPECT_NE((*p)->description().find("STS http://127.0.0.1:9"), std::string::npos);
    // Env keys come first.
    setenv("AWS_ACCESS_KEY_ID", "id", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
    p = AwsCredentialProviderFromEnvironment(false, "");
    EXPECT_EQ((*p)->Get()->access_key_id, "id");
  }
  {
    ScopedEnv env({});
    EXPECT_EQ(StsEndpointFromEnvironment(""), "https://sts.amazonaws.com");
    EXPECT_EQ(StsEndpointFromEnvironment("eu-west-1"), "https://sts.eu-west-1.amazonaws.com");
  }
  {
    ScopedEnv env({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/abc"}});
    EXPECT_EQ(*ContainerCredentialsUrlFromEnvironment(), "http://169.254.170.2/v2/credentials/abc");
    auto p = AwsCredentialProviderFromEnvironment(true, "");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ((*p)->description(), "the container credentials endpoint http://169.254.170.2/v2/credentials/abc");
  }
  for (const char* ok : {"http://127.0.0.1:51679/creds", "https://creds.example.com/x",
                         "http://169.254.170.23/v1/credentials", "http://localhost/x"}) {
    ScopedEnv env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", ok}});
    EXPECT_EQ(*ContainerCredentialsUrlFromEnvironment(), ok);
  }
  for (const char* bad : {"http://evil.example.com/creds", "ftp://127.0.0.1/x", "127.0.0.1/x"}) {
    ScopedEnv env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", bad}});
    Result<std::string> u = ContainerCredentialsUrlFromEnvironment();
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_NE(u.status().message().find("AWS_CONTAINER_CREDENTIALS_FULL_URI"), std::string_view::npos);
  }
}

TEST(AwsCredentialChainTest, NothingConfiguredAndNoInstanceMetadataIsAnonymous) {
  {
    ScopedEnv env({{"AWS_EC2_METADATA_DISABLED", "TRUE"}});
    auto p = AwsCredentialProviderFromEnvironment(false, "");
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE((*p)->anonymous());
  }
  {
    // An emulator endpoint: 169.254.169.254 is not probed at all.
    ScopedEnv env({});
    uint64_t probes = InstanceMetadataProbes();
    auto p = AwsCredentialProviderFromEnvironment(true, "");
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE((*p)->anonymous());
    EXPECT_EQ(InstanceMetadataProbes(), probes);
  }
  {
    // A named metadata endpoint that refuses connections: probed, not found.
    ScopedEnv env({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9"}});
    uint64_t probes = InstanceMetadataProbes();
    EXPECT_FALSE(ProbeInstanceMetadata("http://127.0.0.1:9/"));
    auto p = AwsCredentialProviderFromEnvironment(true, "");
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE((*p)->anonymous());
    EXPECT_FALSE(ProbeInstanceMetadata("http://127.0.0.1:9"));
    EXPECT_EQ(InstanceMetadataProbes(), probes + 1);  // once per process and endpoint
  }
}

TEST(AwsCredentialProviderTest, StoreSignsWithRefreshedCredentialsAndNamesTheSourceAfterExpiry) {
  Result<std::string> endpoint = MotoEndpoint();
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  Driven d;
  d.now = std::chrono::duration_cast<seconds>(WallClock::now().time_since_epoch()).count();
  S3Options o;
  o.bucket = "cairn-conformance";
  o.prefix = "refresh" + std::to_string(std::random_device{}()) + "/";
  o.endpoint = *endpoint;
  o.credential_provider = d.provider;
  o.retry.max_attempts = 2;
  o.retry.initial_backoff = std::chrono::milliseconds(1);
  auto store = S3KvStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Status created = (*store)->CreateBucket();
  ASSERT_TRUE(created.ok() || created.message().find("BucketAlreadyOwnedByYou") != std::string_view::npos)
      << created.ToString();
  ASSERT_TRUE((*store)->Put("a", AsBytes("1")).ok());
  EXPECT_EQ(d.provider->Current()->access_key_id, "k1");
  d.now += 4000;  // the first credentials expired: the next request gets new ones
  ASSERT_TRUE((*store)->Put("b", AsBytes("2")).ok());
  EXPECT_EQ(d.provider->Current()->access_key_id, "k2");
  EXPECT_EQ(d.calls, 2);
  d.now += 4000;
  d.fail = true;
  Status s = (*store)->Put("c", AsBytes("3"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("writing key `c`"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("the test's source"), std::string_view::npos) << s.ToString();
  d.fail = false;
  auto v = (*store)->Get("b");
  ASSERT_TRUE(v.ok() && v->has_value()) << v.status().ToString();
  EXPECT_EQ((*v)->as_string_view(), "2");
}

}  // namespace
}  // namespace cairn::s3
