#include "cairn/kvstore/http/response_limits.h"

#include <algorithm>

#include "cairn/kvstore/http/http_client.h"

namespace cairn::http {

BodyLimit BodyLimitFor(const HttpCall& call, long status) {
  if ((status == 200 || status == 206) && !call.destination.empty()) {
    return {call.destination.size(), "the size of the value's destination"};
  }
  if (status == 206 && call.max_partial_response_bytes != 0) {
    return {std::min(call.max_partial_response_bytes, call.max_response_bytes), "the requested range's length"};
  }
  if (status >= 200 && status < 300) return {call.max_response_bytes, "the read's limit"};
  // The format's own limit, whatever the read asked for (a 404 to a 1-byte read).
  return {kMaxErrorBodyBytes, "the limit of an error document"};
}

std::optional<uint64_t> ParseContentLength(std::string_view value) {
  if (value.empty() || value.size() > 20) return std::nullopt;
  uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return std::nullopt;
    n = n * 10 + digit;
  }
  return n;
}

bool MinimumRateRule::TooSlow(std::chrono::steady_clock::duration elapsed, uint64_t moved) const {
  if (min_bytes_per_second == 0 || elapsed <= grace) return false;
  // elapsed > grace + moved / rate, in microseconds.
  if (moved / min_bytes_per_second > UINT64_MAX / 2000000) return false;  // ~290,000 years allowed
  const uint64_t allowed_us = moved / min_bytes_per_second * 1000000 +
                              moved % min_bytes_per_second * 1000000 / min_bytes_per_second;
  const auto over = std::chrono::duration_cast<std::chrono::microseconds>(elapsed - grace).count();
  return static_cast<uint64_t>(over) > allowed_us;
}

}  // namespace cairn::http
