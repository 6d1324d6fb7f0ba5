#pragma once

// Settings the object-store drivers read from the environment, read one way:
// unset or empty means "use the default", a malformed number is an error that
// names the variable.

#include <cstdint>
#include <string>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/util/result.h"

namespace cairn::http {

// The variable's value, or "" when it is unset.
std::string EnvString(const char* name);

// The variable as a decimal number, or `fallback` when it is unset or empty.
Result<uint64_t> EnvNumber(const char* name, uint64_t fallback);

// CAIRN_HTTP_MAX_ATTEMPTS (1..100, default 6) and
// CAIRN_HTTP_INITIAL_BACKOFF_MS (at most 60000, default 100).
Result<RetryPolicy> RetryPolicyFromEnvironment();

}  // namespace cairn::http
