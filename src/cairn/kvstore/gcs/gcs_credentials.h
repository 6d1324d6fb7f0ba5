// Where the gs:// driver's access tokens come from, looked for in the order
// TensorStore's gcs driver (and Google's client libraries) use:
//
//   1. CAIRN_GCS_BEARER_TOKEN (GcsOptions::bearer_token) or
//      GOOGLE_AUTH_TOKEN_FOR_TESTING: that token, as it is, never refreshed.
//   2. GOOGLE_APPLICATION_CREDENTIALS: the JSON file it names, either
//      - "type": "service_account": a JWT signed with the account's RSA key
//        (gcs_jwt.h) is exchanged at the file's `token_uri` for a token, or
//      - "type": "authorized_user": the file's refresh token is exchanged at
//        `token_uri` (default https://oauth2.googleapis.com/token).
//   3. gcloud's application-default file,
//      $CLOUDSDK_CONFIG/application_default_credentials.json (default
//      ~/.config/gcloud/), read as in 2, when it exists.
//   4. The GCE metadata server: GCE_METADATA_HOST (or GCE_METADATA_ROOT),
//      "host[:port]" or a URL, when it answers a probe (an HTTP response
//      other than 5xx within 1 s, one attempt); else metadata.google.internal
//      when it answers a probe with `Metadata-Flavor: Google`. A metadata
//      server that does not answer (refused, unreachable, silent) is no
//      source, as for TensorStore, google-auth and gcsfs: the next one is
//      used. Each probe runs once per set of these variables in a process.
//      Tokens come from
//      /computeMetadata/v1/instance/service-accounts/default/token.
//   5. Anonymous: no Authorization header.
// With STORAGE_EMULATOR_HOST set (an emulator), 3 and the probe of 4 are
// skipped: only credentials the environment names explicitly are used.
//
// Tokens are cached and fetched again when less than min(5 min, half their
// lifetime) remains; one fetch runs at a time. A malformed credentials file
// fails when the store is opened, naming the file; a token endpoint that
// refuses (400, 401, ...) or keeps failing (5xx, after the retry budget)
// fails the request that needed the token, naming the file and the token URL.
//
// Thread safety: all functions and methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/result.h"

namespace cairn::gcs {

class GcsCredentials {
 public:
  virtual ~GcsCredentials() = default;

  // "authorization: Bearer <token>", or "" when anonymous; fetches a token
  // first when none is cached or the cached one is due for refresh.
  Result<std::string> AuthorizationHeader();
  // E.g. "service account `a@b` from credentials file `/k.json`".
  const std::string& description() const { return description_; }
  uint64_t fetches() const;  // tokens fetched so far (for tests)

 protected:
  explicit GcsCredentials(std::string description) : description_(std::move(description)) {}
  struct Token {
    std::string value;  // "" for anonymous
    std::chrono::seconds lifetime;
  };
  virtual Result<Token> Fetch() = 0;

 private:
  const std::string description_;
  mutable std::mutex mu_;
  std::string header_;                                 // guarded by mu_
  std::chrono::steady_clock::time_point refresh_at_;  // guarded by mu_
  bool have_ = false;                                  // guarded by mu_
  uint64_t fetches_ = 0;                               // guarded by mu_
};

std::shared_ptr<GcsCredentials> AnonymousGcsCredentials();
std::shared_ptr<GcsCredentials> FixedTokenGcsCredentials(std::string token, std::string description);

// A credentials file's contents (`path` names it in errors): a
// service_account or authorized_user JSON. InvalidArgument when malformed.
Result<std::shared_ptr<GcsCredentials>> GcsCredentialsFromJson(std::string_view json, std::string path,
                                                               std::shared_ptr<http::HttpClient> http,
                                                               http::RetryPolicy retry);
Result<std::shared_ptr<GcsCredentials>> GcsCredentialsFromFile(const std::string& path,
                                                               std::shared_ptr<http::HttpClient> http,
                                                               http::RetryPolicy retry);
// The metadata server at `root` ("http://host[:port]").
std::shared_ptr<GcsCredentials> MetadataServerCredentials(std::string root,
                                                          std::shared_ptr<http::HttpClient> http,
                                                          http::RetryPolicy retry);

// Steps 1 to 5 above (except CAIRN_GCS_BEARER_TOKEN, which GcsOptions
// handles), over HttpClient::Default(); the same environment gives the same
// (shared) credentials for the life of the process.
Result<std::shared_ptr<GcsCredentials>> GcsCredentialsFromEnvironment(bool emulator);

// Adds the Authorization header of `credentials` (may be null: anonymous)
// to `call`; an error says which call needed the token.
Status AddGcsAuthorization(GcsCredentials* credentials, http::HttpCall& call);

}  // namespace cairn::gcs
