// AWS Signature Version 4 for S3 requests, with OpenSSL's SHA-256 and HMAC.
//
// Signing, as cairn does it (the AWS SigV4 algorithm):
//   1. The canonical request: method, the URI-encoded path, the query string
//      (parameters sorted, names and values URI-encoded), each signed header
//      as "name:value" (lower-case names, sorted, values trimmed), the list of
//      signed header names, and the hex SHA-256 of the payload.
//   2. The string to sign: "AWS4-HMAC-SHA256", the request time
//      (YYYYMMDD'T'HHMMSS'Z'), the scope "<date>/<region>/s3/aws4_request" and
//      the hex SHA-256 of the canonical request.
//   3. The signing key: HMAC-SHA256 chained over "AWS4" + secret key, the
//      date, the region, "s3" and "aws4_request"; the signature is the hex
//      HMAC of the string to sign under it.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/util/buffer.h"

namespace cairn::s3 {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary credentials
  std::string source;         // where they came from, for messages
  bool anonymous() const { return access_key_id.empty(); }
};

std::string Sha256Hex(ByteView data);

// The hex SHA-256 of nothing (the payload hash of a body-less request).
inline constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct SigV4Input {
  std::string method;
  std::string canonical_uri;    // the encoded path, e.g. "/bucket/a%20b"
  std::string canonical_query;  // sorted and encoded, without '?'
  // Headers to sign (names lower-case; must include host and x-amz-date).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload_sha256;  // hex
  std::string amz_date;        // "20130524T000000Z"
  std::string region;
  std::string service = "s3";
};

// The value of the Authorization header for `in`.
std::string SigV4Authorization(const AwsCredentials& credentials, const SigV4Input& in);

// The current UTC time as "YYYYMMDDTHHMMSSZ".
std::string AmzDateNow();

}  // namespace cairn::s3
