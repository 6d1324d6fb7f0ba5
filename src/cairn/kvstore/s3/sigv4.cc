#include "cairn/kvstore/s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>

#include "cairn/util/hex.h"

namespace cairn::s3 {
namespace {

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

std::string Sha256Hex(ByteView data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(data.data(), data.size(), digest);
  return HexLower(digest, sizeof(digest));
}

std::string SigV4Authorization(const AwsCredentials& credentials, const SigV4Input& in) {
  auto headers = in.headers;
  std::sort(headers.begin(), headers.end());
  std::string canonical_headers;
  std::string signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += name + ":" + std::string(Trim(value)) + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += name;
  }
  // Step 1: the canonical request.
  std::string canonical = in.method + "\n" + in.canonical_uri + "\n" + in.canonical_query + "\n" +
                          canonical_headers + "\n" + signed_headers + "\n" + in.payload_sha256;
  // Step 2: the string to sign.
  std::string date = in.amz_date.substr(0, 8);
  std::string scope = date + "/" + in.region + "/" + in.service + "/aws4_request";
  std::string to_sign =
      "AWS4-HMAC-SHA256\n" + in.amz_date + "\n" + scope + "\n" + Sha256Hex(AsBytes(canonical));
  // Step 3: the signing key and the signature.
  std::string key = Hmac("AWS4" + credentials.secret_access_key, date);
  key = Hmac(key, in.region);
  key = Hmac(key, in.service);
  key = Hmac(key, "aws4_request");
  std::string sig = Hmac(key, to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" + scope +
         ", SignedHeaders=" + signed_headers +
         ", Signature=" + HexLower(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

std::string AmzDateNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace cairn::s3
