#include "cairn/kvstore/http/environment.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace cairn::http {

std::string EnvString(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

Result<uint64_t> EnvNumber(const char* name, uint64_t fallback) {
  std::string v = EnvString(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (end == nullptr || *end != '\0' || v[0] == '-') {
    return InvalidArgumentError(std::string(name) + "=`" + v + "` is not a number");
  }
  return static_cast<uint64_t>(n);
}

Result<RetryPolicy> RetryPolicyFromEnvironment() {
  CAIRN_ASSIGN_OR_RETURN(uint64_t attempts, EnvNumber("CAIRN_HTTP_MAX_ATTEMPTS", 6));
  CAIRN_ASSIGN_OR_RETURN(uint64_t backoff, EnvNumber("CAIRN_HTTP_INITIAL_BACKOFF_MS", 100));
  RetryPolicy retry;
  retry.max_attempts = static_cast<int>(std::clamp<uint64_t>(attempts, 1, 100));
  retry.initial_backoff = std::chrono::milliseconds(std::min<uint64_t>(backoff, 60000));
  return retry;
}

}  // namespace cairn::http
