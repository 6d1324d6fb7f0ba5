// HttpClient: the one HTTP transport of the object-store drivers (s3/, gcs/).
//
// Built on libcurl's multi interface: one background thread drives every
// transfer of a client, so many requests are in flight at once (up to
// `HttpClientOptions::max_in_flight`) over a shared pool of kept-alive
// connections, while callers simply block in `Execute` / `ExecuteAll`.
//
// Retries. A call is retried, with exponential backoff and full jitter
// (a delay drawn uniformly from [d/2, d], d doubling from
// `RetryPolicy::initial_backoff` up to `max_backoff`), when it is idempotent
// and its attempt failed transiently: HTTP 429 or 5xx, a timeout or stall, a
// dropped or refused connection, a truncated response. A call that is not
// idempotent (a conditional write) is retried only when the connection could
// not be made at all, since then nothing reached the server. `prepare` runs
// before every attempt (signers put a fresh date there), and the request body
// is sent again from its start.
//
// Sent at most once per attempt. libcurl sends a request again by itself,
// on a new connection, when a kept-alive connection it reused closes before
// any answer comes. The closed connection may well have delivered the
// request, so a call that must not be applied twice (one that is not
// idempotent, or that says `fresh_connection`: a GCS resumable chunk) always
// goes out on a connection of its own, where that resend never happens.
//
// Bounds. No server decides how much is received or for how long: every
// body is bounded by what the call asked for, a Content-Length must agree
// with its body, and an attempt must keep a minimum average rate
// (response_limits.h). A body over its bound is ResourceExhausted, a body
// that disagrees with its Content-Length DataLoss (neither is retried).
//
// Errors. Transport failures and transient statuses that outlive the retry
// budget are Unavailable; the message names the operation, the method and
// URL, the HTTP status (or curl's error) and the number of attempts. Every
// other HTTP status is returned as a response for the driver to interpret;
// `HttpStatusError` turns one into a Status with the same information.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/kvstore/http/response_limits.h"
#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn::http {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  ByteView body;                     // must stay valid until the call returns
};

struct HttpResponse {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
  Buffer body;
  // Bytes of a 200/206 body written to the call's `destination` (then not
  // to `body`).
  uint64_t destination_bytes = 0;
  // The value of the first header named `lower_name`, or nullopt.
  std::optional<std::string> Header(std::string_view lower_name) const;
};

struct RetryPolicy {
  int max_attempts = 6;  // the first attempt included; >= 1
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
};

struct HttpCall {
  HttpRequest request;
  // Runs before each attempt on the client's thread (e.g. signs the request
  // with the current time). An error ends the call with that error.
  std::function<Status(HttpRequest&)> prepare;
  bool idempotent = true;
  // Send on a new connection even when idempotent (see "Sent at most once").
  bool fresh_connection = false;
  RetryPolicy retry;
  // For error messages: what the driver was doing ("writing key `a` of s3://b/").
  std::string operation;
  // Keeps storage the request's body points into alive with the call.
  std::shared_ptr<const void> keep_alive;
  // A 2xx body larger than this fails the call (ResourceExhausted), as soon
  // as its Content-Length or its bytes say so: nothing past it is received
  // (response_limits.h). Bodies of other statuses (error documents) are
  // bounded by kMaxErrorBodyBytes instead.
  uint64_t max_response_bytes = uint64_t{1} << 40;
  // When not zero: the bound of a 206 body instead (a ranged read asks for
  // this many bytes; a 200 holding the whole value keeps max_response_bytes).
  uint64_t max_partial_response_bytes = 0;
  // When not empty: the body of a 200 or 206 response is written here, from
  // its start, instead of into `HttpResponse::body` (no buffer, no copy:
  // a whole-chunk read lands in the caller's array), and
  // `HttpResponse::destination_bytes` says how many bytes came. Bodies of
  // other statuses (errors, 404) still go to `body`. A body longer than the
  // destination fails the call with DataLoss (not retried). Each attempt
  // writes it again from the start. Must stay valid until the call returns.
  MutableByteView destination;
};

struct HttpClientOptions {
  int max_in_flight = 64;  // transfers running at once; more calls queue
  std::chrono::milliseconds connect_timeout{10000};
  // An attempt moving less than one byte per second for this long fails
  // (as a timeout, so it is retried).
  std::chrono::seconds stall_timeout{30};
  // Upper bound of one attempt; zero: none.
  std::chrono::milliseconds attempt_timeout{0};
  // An attempt moving less than `min_bytes_per_second` on average once its
  // first `grace` is over fails as a timeout (response_limits.h): a drip
  // that the stall rule lets through ends at `grace`.
  MinimumRateRule min_rate;
  // Certificate authorities for TLS (CURLOPT_CAINFO / CURLOPT_CAPATH);
  // empty: the system's. `ca_variables` names where they came from.
  std::string ca_bundle;
  std::string ca_path;
  std::string ca_variables;

  // max_in_flight from CAIRN_HTTP_MAX_IN_FLIGHT, stall_timeout from
  // CAIRN_HTTP_STALL_TIMEOUT_S (seconds), min_rate from
  // CAIRN_HTTP_MIN_RATE_BYTES_S (0: off) and CAIRN_HTTP_RATE_GRACE_S
  // (seconds) when set; the certificate
  // authorities from TlsTrustFromEnvironment (environment.h) when valid.
  static HttpClientOptions FromEnvironment();
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();  // fails calls still queued, joins the thread
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // The process-wide client the drivers share (options from the environment,
  // read at its first use), one per set of certificate authorities: stores
  // opened after CAIRN_CA_BUNDLE & co. change get a client that trusts the
  // new ones.
  static std::shared_ptr<HttpClient> Default();

  // Runs one call to completion (all its attempts).
  Result<HttpResponse> Execute(HttpCall call);
  // Runs all calls concurrently; results in the order of `calls`.
  std::vector<Result<HttpResponse>> ExecuteAll(std::vector<HttpCall> calls);

  const HttpClientOptions& options() const { return options_; }
  // Attempts that were retried since the client was made (for tests).
  uint64_t retries() const;
  // Times the transfer thread went round its loop (woke from its poll) since
  // the client was made (for tests: it must sleep, not spin, while calls
  // wait for room).
  uint64_t loop_iterations() const;
  // Calls submitted (Execute / ExecuteAll) since the client was made, each
  // counted once whatever its attempts (for tests counting requests).
  uint64_t calls() const;
  // Queued calls the transfer thread looked at while choosing what to start
  // (for tests: choosing must not cost a look at every queued call on every
  // turn, which made a batch of N calls with few in flight O(N^2)).
  uint64_t queue_visits() const;

  struct Impl;

 private:
  HttpClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

// "<operation> (<METHOD> <url>): HTTP <status>[ <code>: <message>]" from a
// response the driver did not expect, with the code StatusForHttp gives.
Status HttpStatusError(const HttpCall& call, const HttpResponse& response,
                       std::string_view detail = {});

// The StatusCode an unexpected HTTP status maps to: 400 -> InvalidArgument,
// 401/403 -> FailedPrecondition (credentials), 404 -> NotFound,
// 409/412 -> FailedPrecondition, 429/5xx -> Unavailable, else Internal.
StatusCode StatusForHttp(long status);

// Percent-encodes every byte except A-Z a-z 0-9 - . _ ~ (and '/' when
// `keep_slash`), as SigV4 and URLs of object names need.
std::string UriEncode(std::string_view s, bool keep_slash);

// An application/x-www-form-urlencoded body: name=value pairs joined by '&',
// each value UriEncode'd (token requests to OAuth and STS endpoints).
std::string FormEncode(std::initializer_list<std::pair<const char*, std::string>> fields);

}  // namespace cairn::http
