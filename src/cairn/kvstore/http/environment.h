#pragma once

// Settings the object-store drivers read from the environment, read one way:
// unset or empty means "use the default", a malformed number is an error that
// names the variable. HttpClientOptions::FromEnvironment and
// HttpClient::Default (http_client.h) are defined in environment.cc too.

#include <cstdint>
#include <string>
#include <tuple>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/result.h"

namespace cairn::http {

// The variable's value, or "" when it is unset.
std::string EnvString(const char* name);

// The variable as a decimal number, or `fallback` when it is unset or empty.
Result<uint64_t> EnvNumber(const char* name, uint64_t fallback);

// The variable as a yes/no: true/1/yes or false/0/no (any case), or
// `fallback` when unset or empty; anything else is InvalidArgument.
Result<bool> EnvBool(const char* name, bool fallback);

// The certificate authorities TLS connections are verified against, when not
// the system's (a private CA, as MinIO and other S3-compatible servers on
// premises often have). The first variable set wins:
//   file: CAIRN_CA_BUNDLE, AWS_CA_BUNDLE, TENSORSTORE_CA_BUNDLE,
//         CURL_CA_BUNDLE, SSL_CERT_FILE (PEM, one or more certificates);
//   directory: TENSORSTORE_CA_PATH, SSL_CERT_DIR (hashed names, c_rehash).
// A file or directory that does not exist (or is not of that kind) is
// InvalidArgument naming the variable and the path.
struct TlsTrust {
  std::string ca_bundle;  // empty: the system's
  std::string ca_path;    // empty: the system's
  std::string variables;  // the variables they came from, for messages
  bool operator<(const TlsTrust& o) const {
    return std::tie(ca_bundle, ca_path) < std::tie(o.ca_bundle, o.ca_path);
  }
};
Result<TlsTrust> TlsTrustFromEnvironment();

// CAIRN_HTTP_MAX_ATTEMPTS (1..100, default 6) and
// CAIRN_HTTP_INITIAL_BACKOFF_MS (at most 60000, default 100).
Result<RetryPolicy> RetryPolicyFromEnvironment();

}  // namespace cairn::http
