// The signed assertion a Google service account trades for an access token
// (the OAuth 2.0 JWT-bearer grant): a JSON Web Token signed with RS256
// (RSASSA-PKCS1-v1_5 over SHA-256) by the account's private key, through
// OpenSSL.
//
//   header  {"alg":"RS256","typ":"JWT","kid":<private_key_id>}
//   claims  {"iss":<client_email>,"scope":<scope>,"aud":<token_uri>,
//            "iat":<now>,"exp":<now + lifetime>}
//   token   base64url(header) "." base64url(claims) "." base64url(signature)
//           (base64url without '=' padding)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/result.h"

namespace cairn::gcs {

// The fields of a `"type": "service_account"` credentials file that matter.
struct ServiceAccountKey {
  std::string client_email;
  std::string private_key;     // PEM ("-----BEGIN PRIVATE KEY-----", PKCS#8 or PKCS#1)
  std::string private_key_id;  // may be empty
  std::string token_uri;
};

// The scope cairn asks for: read and write access to Cloud Storage.
inline constexpr char kGcsScope[] = "https://www.googleapis.com/auth/devstorage.read_write";

// The JWT above for `key`, issued at `now_seconds` (Unix time), valid for an
// hour. `where` (the credentials file) goes into errors: an unreadable PEM or
// a key that is not RSA is InvalidArgument naming it.
Result<std::string> SignServiceAccountJwt(const ServiceAccountKey& key, std::string_view scope,
                                          int64_t now_seconds, std::string_view where);

std::string Base64UrlEncode(std::string_view bytes);
// InvalidArgument on a character outside the base64url alphabet.
Result<std::string> Base64UrlDecode(std::string_view text);

}  // namespace cairn::gcs
