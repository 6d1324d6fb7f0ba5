// GCS credentials without a network: the service-account JWT (its header and
// claims, and an RS256 signature that OpenSSL verifies with the public key),
// base64url, and credentials files that are malformed, each beside a valid
// control. The token exchange itself is tested against a local token
// endpoint in tests/python/test_gcs_credentials.py.
#include "cairn/kvstore/gcs/gcs_credentials.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <memory>

#include "cairn/kvstore/gcs/gcs_jwt.h"

namespace cairn::gcs {
namespace {

using PKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

std::string PrivatePem(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  EXPECT_EQ(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr), 1);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

PKey RsaKey() { return PKey(EVP_RSA_gen(2048), &EVP_PKEY_free); }

ServiceAccountKey KeyFor(EVP_PKEY* pkey) {
  ServiceAccountKey key;
  key.client_email = "saver@project.iam.gserviceaccount.com";
  key.private_key = PrivatePem(pkey);
  key.private_key_id = "key-id-1";
  key.token_uri = "http://127.0.0.1:1/token";
  return key;
}

bool Verifies(EVP_PKEY* pkey, const std::string& signing_input, const std::string& signature) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EXPECT_EQ(EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey), 1);
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(),
                          reinterpret_cast<const unsigned char*>(signing_input.data()),
                          signing_input.size()) == 1;
}

TEST(GcsJwt, HeaderClaimsAndSignatureVerifyWithThePublicKey) {
  PKey pkey = RsaKey();
  ASSERT_TRUE(pkey);
  Result<std::string> jwt = SignServiceAccountJwt(KeyFor(pkey.get()), kGcsScope, 1700000000, "k.json");
  ASSERT_TRUE(jwt.ok()) << jwt.status().ToString();
  size_t dot1 = jwt->find('.');
  size_t dot2 = jwt->find('.', dot1 + 1);
  ASSERT_NE(dot2, std::string::npos);
  EXPECT_EQ(jwt->find_first_of("=+/"), std::string::npos);  // base64url, unpadded

  auto header = nlohmann::json::parse(*Base64UrlDecode(jwt->substr(0, dot1)));
  EXPECT_EQ(header["alg"], "RS256");
  EXPECT_EQ(header["typ"], "JWT");
  EXPECT_EQ(header["kid"], "key-id-1");
  auto claims = nlohmann::json::parse(*Base64UrlDecode(jwt->substr(dot1 + 1, dot2 - dot1 - 1)));
  EXPECT_EQ(claims["iss"], "saver@project.iam.gserviceaccount.com");
  EXPECT_EQ(claims["aud"], "http://127.0.0.1:1/token");
  EXPECT_EQ(claims["scope"], kGcsScope);
  EXPECT_EQ(claims["iat"], 1700000000);
  EXPECT_EQ(claims["exp"], 1700003600);

  Result<std::string> sig = Base64UrlDecode(jwt->substr(dot2 + 1));
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), 256u);  // 2048-bit RSA
  EXPECT_TRUE(Verifies(pkey.get(), jwt->substr(0, dot2), *sig));
  // Controls: other claims, or another key, do not verify.
  std::string tampered = jwt->substr(0, dot2);
  tampered[dot1 + 5] = tampered[dot1 + 5] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(Verifies(pkey.get(), tampered, *sig));
  PKey other = RsaKey();
  EXPECT_FALSE(Verifies(other.get(), jwt->substr(0, dot2), *sig));
}

TEST(GcsJwt, BadPemAndNonRsaKeysAreClearErrors) {
  PKey pkey = RsaKey();
  ServiceAccountKey key = KeyFor(pkey.get());
  ASSERT_TRUE(SignServiceAccountJwt(key, kGcsScope, 1, "`k.json`").ok());  // control

  ServiceAccountKey bad = key;
  bad.private_key = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n";
  Result<std::string> r = SignServiceAccountJwt(bad, kGcsScope, 1, "`k.json`");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("`k.json`"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("not a readable PEM private key"), std::string::npos);

  bad.private_key = key.private_key.substr(0, key.private_key.size() / 2);  // truncated
  r = SignServiceAccountJwt(bad, kGcsScope, 1, "`k.json`");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);

  PKey ec(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  ASSERT_TRUE(ec);
  bad.private_key = PrivatePem(ec.get());
  r = SignServiceAccountJwt(bad, kGcsScope, 1, "`k.json`");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an RSA key"), std::string::npos) << r.status().ToString();
}

TEST(GcsJwt, Base64UrlRoundTrips) {
  for (std::string s : {"", "f", "fo", "foo", "foob", "\xff\xfe\x00\x01"}) {
    EXPECT_EQ(*Base64UrlDecode(Base64UrlEncode(s)), s);
  }
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
  EXPECT_FALSE(Base64UrlDecode("ab=c").ok());
  EXPECT_FALSE(Base64UrlDecode("ab+c").ok());
}

Status FromJson(const std::string& json) {
  return GcsCredentialsFromJson(json, "/keys/sa.json", http::HttpClient::Default(), {}).status();
}

TEST(GcsCredentialsFile, MalformedFilesNameTheFileAndTheProblem) {
  PKey pkey = RsaKey();
  nlohmann::json good = {{"type", "service_account"},
                         {"client_email", "a@b.iam.gserviceaccount.com"},
                         {"private_key", PrivatePem(pkey.get())},
                         {"private_key_id", "k"},
                         {"token_uri", "http://127.0.0.1:1/token"}};
  ASSERT_TRUE(FromJson(good.dump()).ok());  // control
  nlohmann::json user = {{"type", "authorized_user"},
                         {"client_id", "id"},
                         {"client_secret", "s"},
                         {"refresh_token", "r"}};
  ASSERT_TRUE(FromJson(user.dump()).ok());  // control

  struct Case {
    std::string json;
    std::string expect;
  };
  nlohmann::json no_key = good;
  no_key.erase("private_key");
  nlohmann::json not_pem = good;
  not_pem["private_key"] = "MIIEvQIBADANBg";
  nlohmann::json no_refresh = user;
  no_refresh.erase("refresh_token");
  nlohmann::json other = good;
  other["type"] = "external_account";
  nlohmann::json numeric = good;
  numeric["client_email"] = 7;
  for (const Case& c : {Case{"{\"type\": \"service_account\",", "is not a JSON object"},
                        Case{"[]", "is not a JSON object"},
                        Case{"", "is not a JSON object"},
                        Case{no_key.dump(), "`private_key` is missing"},
                        Case{not_pem.dump(), "no -----BEGIN line"},
                        Case{no_refresh.dump(), "`refresh_token` is missing"},
                        Case{other.dump(), "unsupported type `external_account`"},
                        Case{numeric.dump(), "`client_email` is missing or not a non-empty string"}}) {
    Status s = FromJson(c.json);
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("/keys/sa.json"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.ToString();
  }
}

TEST(GcsCredentialsFile, AMissingFileIsNotFound) {
  Result<std::shared_ptr<GcsCredentials>> r =
      GcsCredentialsFromFile("/nonexistent/cairn/sa.json", http::HttpClient::Default(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/cairn/sa.json"), std::string::npos);
}

TEST(GcsCredentials, AnonymousAndFixedTokens) {
  auto anon = AnonymousGcsCredentials();
  EXPECT_EQ(*anon->AuthorizationHeader(), "");
  auto fixed = FixedTokenGcsCredentials("tok", "test");
  EXPECT_EQ(*fixed->AuthorizationHeader(), "authorization: Bearer tok");
  EXPECT_EQ(*fixed->AuthorizationHeader(), "authorization: Bearer tok");
  EXPECT_EQ(fixed->fetches(), 1u);  // cached
  http::HttpCall call;
  ASSERT_TRUE(AddGcsAuthorization(fixed.get(), call).ok());
  ASSERT_TRUE(AddGcsAuthorization(nullptr, call).ok());
  EXPECT_EQ(call.request.headers, std::vector<std::string>{"authorization: Bearer tok"});
}

}  // namespace
}  // namespace cairn::gcs
