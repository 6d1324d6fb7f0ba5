// How much, and how slowly, a server may answer one HttpCall (http_client.h).
// A server decides nothing about what cairn holds or how long it waits:
//
//  1. The body's bound is chosen by the status (BodyLimit): a 200/206 body
//     going to the call's destination has the destination's size; a 206
//     has the call's `max_partial_response_bytes` (a ranged read: its
//     length); other 2xx the call's `max_response_bytes` (a whole-object
//     read: the limit its caller passed; listings and JSON documents: their
//     format's); any other status kMaxErrorBodyBytes (an error document,
//     whatever the read asked for).
//  2. A Content-Length is parsed strictly (ParseContentLength: digits only,
//     no overflow; repeated only with the same value). One that does not
//     parse, or is above the bound, fails the attempt as its header arrives,
//     before a byte of the body is read.
//  3. The body is counted as it arrives; past the bound the transfer is
//     aborted in the write callback, so nothing beyond the bound is held.
//  4. When the transfer ends, a body of another length than its
//     Content-Length is an error: fewer bytes (libcurl reports those as a
//     truncated answer, retried), or more (libcurl stops at the announced
//     length and reports the excess in its log, which the client watches).
//     Neither is ever returned as a value.
//  5. Time (MinimumRateRule): beside the stall rule (under 1 byte/s for the
//     stall timeout, libcurl's low-speed check), an attempt must move, on
//     average, `min_bytes_per_second` once its first `grace` is over: it
//     fails when elapsed > grace + moved / min_bytes_per_second. A transfer
//     at least that fast never trips it unless its first byte takes longer
//     than `grace`; a drip (a few bytes a second, which the stall rule lets
//     through) fails at `grace`. Since a body is bounded (3), so is the time
//     of any attempt: at most grace + bound / min_bytes_per_second. This is
//     google-cloud-cpp's "minimum transfer rate over the stall timeout"
//     applied to the whole attempt, so that a rate just above the minimum
//     cannot be kept up forever by an endless answer either.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cairn::http {

struct HttpCall;

// The most bytes an error document (the body of a status other than 2xx)
// may have: S3's and GCS's are well under a few KiB.
inline constexpr uint64_t kMaxErrorBodyBytes = uint64_t{1} << 20;

// The most bytes of a 2xx answer that is a short document (the XML or JSON
// answer to a PUT, POST or DELETE; a token); the drivers set it on such calls.
inline constexpr uint64_t kMaxAnswerBytes = uint64_t{16} << 20;

// The bound of the body of a `status` answer to `call` (step 1 above), and
// what it is, for messages ("the destination's size", ...).
struct BodyLimit {
  uint64_t bytes = 0;
  const char* what = "";
};
BodyLimit BodyLimitFor(const HttpCall& call, long status);

// A Content-Length value: decimal digits only (surrounding spaces already
// trimmed), at most UINT64_MAX; nullopt otherwise (empty, a sign, a
// fraction, "99999999999999999999").
std::optional<uint64_t> ParseContentLength(std::string_view value);

struct MinimumRateRule {
  std::chrono::seconds grace{60};
  uint64_t min_bytes_per_second = 1024;  // 0: no rule
  // Whether an attempt that has moved `moved` bytes (sent and received) in
  // `elapsed` breaks the rule.
  bool TooSlow(std::chrono::steady_clock::duration elapsed, uint64_t moved) const;
};

}  // namespace cairn::http
