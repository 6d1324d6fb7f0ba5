// AwsCredentialProvider: the credentials an S3 store signs with, asked for
// per request and refreshed before they expire.
//
// Credentials from the environment or the shared file never expire (a fixed
// provider). Temporary ones (web identity, ECS, EC2 instance metadata) come
// with an `Expiration`; the provider keeps them and fetches new ones, as the
// AWS SDKs do:
//   1. Fresh (no expiration, or more than the refresh margin left): the
//      cached credentials are returned, under a mutex, without I/O.
//   2. Within the margin (min(5 min, half the lifetime they were fetched
//      with)) but not expired: one caller fetches; callers arriving while it
//      fetches get the cached ones. A failed fetch keeps the cached ones and
//      is tried again after `kRetryAfterFailure` (never past the expiry).
//   3. Expired (or none yet): callers wait for one fetch; a failure is the
//      error, naming the source, and for expired credentials the expiry.
//
// Thread safety: all methods may be called concurrently. `Fetch` runs on the
// caller's thread (never on the HttpClient's own thread, which would
// deadlock a fetch over the same client): S3KvStore asks when it builds a
// call, and its per-attempt signer only reads the cache (`Current`).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/kvstore/s3/sigv4.h"
#include "cairn/result.h"

namespace cairn::s3 {

using WallClock = std::chrono::system_clock;

struct ExpiringAwsCredentials {
  AwsCredentials credentials;
  std::optional<WallClock::time_point> expiration;  // nullopt: never expires
};

class AwsCredentialProvider {
 public:
  using FetchFn = std::function<Result<ExpiringAwsCredentials>()>;
  using ClockFn = std::function<WallClock::time_point()>;

  static constexpr std::chrono::seconds kRefreshMargin{300};
  static constexpr std::chrono::seconds kRetryAfterFailure{10};

  // `description` names the source in errors ("EC2 instance metadata at
  // http://169.254.169.254"); `clock` is for tests (default: the system's).
  AwsCredentialProvider(std::string description, FetchFn fetch, ClockFn clock = nullptr);

  // Credentials that never expire (anonymous when `credentials` has no key).
  static std::shared_ptr<AwsCredentialProvider> Fixed(AwsCredentials credentials);

  // Current credentials, fetched first as the steps above say.
  Result<AwsCredentials> Get();
  // The cached credentials (no fetch; the last good ones, maybe expired);
  // nullopt before the first successful fetch.
  std::optional<AwsCredentials> Current() const;

  // True for a fixed provider without a key (requests go unsigned).
  bool anonymous() const { return anonymous_; }
  const std::string& description() const { return description_; }
  uint64_t fetches() const;  // successful fetches so far (for tests)
  uint64_t failures() const;  // failed fetches so far (for tests)

 private:
  enum class State { kFresh, kRefreshDue, kMissingOrExpired };
  State StateLocked(WallClock::time_point now) const;

  const std::string description_;
  const FetchFn fetch_;
  const ClockFn clock_;
  bool anonymous_ = false;
  std::mutex fetch_mu_;  // held by the one caller fetching
  mutable std::mutex mu_;
  std::optional<ExpiringAwsCredentials> cached_;  // guarded by mu_
  WallClock::time_point refresh_at_;              // guarded by mu_
  WallClock::time_point retry_at_;                // guarded by mu_ (after a failure)
  uint64_t fetches_ = 0;                          // guarded by mu_
  uint64_t failures_ = 0;                         // guarded by mu_
  Status last_error_;                             // guarded by mu_
};

// "2026-12-04T10:18:32Z", with optional fractional seconds and a `Z` or
// `+hh:mm`/`-hh:mm` offset (what STS, ECS and IMDS send). InvalidArgument
// naming `where` otherwise.
Result<WallClock::time_point> ParseAwsTimestamp(std::string_view text, std::string_view where);

// The JSON answer of the ECS container endpoint and of EC2 instance metadata:
// {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} (and, from IMDS,
// "Code": "Success"). DataLoss naming `where` when it is not such an object.
Result<ExpiringAwsCredentials> ParseAwsCredentialsJson(std::string_view json, std::string_view where);

}  // namespace cairn::s3
