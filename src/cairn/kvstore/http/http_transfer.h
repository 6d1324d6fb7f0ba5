// One call of HttpClient in progress (http_client.cc's loop drives it): the
// state of its current attempt and libcurl's callbacks for it, which receive
// the answer within the bounds of response_limits.h and send the request's
// body. Internal to http/.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/http/response_limits.h"

namespace cairn::http {

struct Batch;

struct Transfer {
  HttpCall call;
  HttpRequest attempt_request;  // `call.request` after `prepare`
  int attempt = 0;              // attempts started so far
  std::chrono::steady_clock::time_point not_before;
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  size_t read_pos = 0;
  // What the server sent that ends the attempt (response_limits.h).
  bool body_too_large = false;
  BodyLimit limit;                          // the bound it went over
  std::optional<uint64_t> announced_bytes;  // a Content-Length over it
  bool destination_too_small = false;
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool excess = false;        // bytes past the Content-Length (libcurl's log)
  std::string framing_error;  // a Content-Length that cannot be taken
  const MinimumRateRule* min_rate = nullptr;
  std::chrono::steady_clock::time_point started;
  bool too_slow = false;
  uint64_t moved = 0;  // when too_slow
  char error[CURL_ERROR_SIZE] = {};
  HttpResponse response;
  // Completion: the slot for the result, and the batch to signal.
  std::optional<Result<HttpResponse>>* result = nullptr;
  Batch* batch = nullptr;
};

// Clears what the last attempt of `t` received and starts its clock.
void ResetAttempt(Transfer* t, const MinimumRateRule* min_rate);

// Points the body, header, log and progress callbacks of `t->easy` (and, for
// PUT and POST, the request body's read and seek callbacks) at `t`.
void SetTransferCallbacks(Transfer* t, bool sends_body);

// The error that ended the attempt as the answer came, before libcurl's
// (a bound, a Content-Length), or OK. `where` names the call.
Status ReceiveError(const Transfer& t, long status, const std::string& where);

// For an attempt libcurl completed: its body against its Content-Length
// (step 4 of response_limits.h).
Status CheckFraming(const Transfer& t, long status, const std::string& where);

// The message of an attempt that broke the minimum rate rule.
std::string TooSlowMessage(const Transfer& t);

}  // namespace cairn::http
