#include "cairn/kvstore/http/environment.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

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

Result<bool> EnvBool(const char* name, bool fallback) {
  std::string v = EnvString(name);
  if (v.empty()) return fallback;
  std::string lower;
  for (char c : v) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true" || lower == "1" || lower == "yes") return true;
  if (lower == "false" || lower == "0" || lower == "no") return false;
  return InvalidArgumentError(std::string(name) + "=`" + v + "` is not true or false");
}

Result<TlsTrust> TlsTrustFromEnvironment() {
  TlsTrust trust;
  for (const char* name : {"CAIRN_CA_BUNDLE", "AWS_CA_BUNDLE", "TENSORSTORE_CA_BUNDLE", "CURL_CA_BUNDLE",
                           "SSL_CERT_FILE"}) {
    std::string v = EnvString(name);
    if (v.empty()) continue;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(v, ec)) {
      return InvalidArgumentError(std::string(name) + "=`" + v +
                                  "`: no such file (a PEM bundle of the certificate authorities to trust)");
    }
    trust.ca_bundle = v;
    trust.variables = name;
    break;
  }
  for (const char* name : {"TENSORSTORE_CA_PATH", "SSL_CERT_DIR"}) {
    std::string v = EnvString(name);
    if (v.empty()) continue;
    std::error_code ec;
    if (!std::filesystem::is_directory(v, ec)) {
      return InvalidArgumentError(std::string(name) + "=`" + v +
                                  "`: no such directory (of certificate authorities to trust)");
    }
    trust.ca_path = v;
    trust.variables += (trust.variables.empty() ? "" : ", ") + std::string(name);
    break;
  }
  return trust;
}

Result<RetryPolicy> RetryPolicyFromEnvironment() {
  CAIRN_ASSIGN_OR_RETURN(uint64_t attempts, EnvNumber("CAIRN_HTTP_MAX_ATTEMPTS", 6));
  CAIRN_ASSIGN_OR_RETURN(uint64_t backoff, EnvNumber("CAIRN_HTTP_INITIAL_BACKOFF_MS", 100));
  RetryPolicy retry;
  retry.max_attempts = static_cast<int>(std::clamp<uint64_t>(attempts, 1, 100));
  retry.initial_backoff = std::chrono::milliseconds(std::min<uint64_t>(backoff, 60000));
  return retry;
}

// The options and the shared clients of http_client.h that come from the
// environment.
HttpClientOptions HttpClientOptions::FromEnvironment() {
  HttpClientOptions o;
  if (const char* v = std::getenv("CAIRN_HTTP_MAX_IN_FLIGHT")) {
    int n = std::atoi(v);
    if (n >= 1 && n <= 4096) o.max_in_flight = n;
  }
  if (const char* v = std::getenv("CAIRN_HTTP_STALL_TIMEOUT_S")) {
    int n = std::atoi(v);
    if (n >= 1 && n <= 86400) o.stall_timeout = std::chrono::seconds(n);
  }
  if (const char* v = std::getenv("CAIRN_HTTP_MIN_RATE_BYTES_S")) {
    char* end = nullptr;
    uint64_t n = std::strtoull(v, &end, 10);
    if (*v >= '0' && *v <= '9' && *end == '\0') o.min_rate.min_bytes_per_second = n;
  }
  if (const char* v = std::getenv("CAIRN_HTTP_RATE_GRACE_S")) {
    int n = std::atoi(v);
    if (n >= 1 && n <= 86400) o.min_rate.grace = std::chrono::seconds(n);
  }
  if (Result<TlsTrust> trust = TlsTrustFromEnvironment(); trust.ok()) {
    o.ca_bundle = trust->ca_bundle;
    o.ca_path = trust->ca_path;
    o.ca_variables = trust->variables;
  }
  return o;
}

std::shared_ptr<HttpClient> HttpClient::Default() {
  // Never destroyed: stores opened from URLs may live until exit.
  static std::mutex mu;
  static auto* clients = new std::map<std::pair<std::string, std::string>, std::shared_ptr<HttpClient>>();
  HttpClientOptions options = HttpClientOptions::FromEnvironment();
  std::lock_guard<std::mutex> lock(mu);
  auto& client = (*clients)[{options.ca_bundle, options.ca_path}];
  if (!client) client = std::make_shared<HttpClient>(std::move(options));
  return client;
}

}  // namespace cairn::http
