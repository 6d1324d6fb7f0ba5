#include "cairn/kvstore/s3/aws_instance_metadata.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "cairn/kvstore/http/environment.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpClient;
using http::HttpResponse;

namespace {

constexpr char kContainerHost[] = "http://169.254.170.2";
constexpr char kTokenPath[] = "/latest/api/token";
constexpr char kRolePath[] = "/latest/meta-data/iam/security-credentials/";

Result<std::string> ReadSmallFile(const std::string& path, const char* what) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return NotFoundError(std::string(what) + " `" + path + "` cannot be opened: " + std::strerror(errno));
  }
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && text.size() <= 65536) text.append(buf, n);
  std::fclose(f);
  if (text.size() > 65536) return InvalidArgumentError(std::string(what) + " `" + path + "` is larger than 64 KiB");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// One request of a credentials fetch: anything but 200 fails, naming what
// was asked, the URL and the status.
Result<std::string> Request(HttpClient& http, std::string method, std::string url,
                            std::vector<std::string> headers, std::string operation,
                            http::RetryPolicy retry) {
  HttpCall call;
  call.request.method = std::move(method);
  call.request.url = std::move(url);
  call.request.headers = std::move(headers);
  call.operation = std::move(operation);
  call.retry = retry;
  call.max_response_bytes = 1 << 20;
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, http.Execute(call));
  if (r.status != 200) {
    Status s = http::HttpStatusError(call, r);
    // 4xx: refused or no role -- the configuration is at fault.
    if (r.status < 500) return FailedPreconditionError(std::string(s.message()));
    return s;
  }
  return std::string(r.body.as_string_view());
}

bool IsAllowedHttpHost(std::string_view host) {
  return host == "127.0.0.1" || host.substr(0, 4) == "127." || host == "localhost" || host == "[::1]" ||
         host == "169.254.170.2" || host == "169.254.170.23" || host == "[fd00:ec2::23]";
}

std::string StripSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

Result<std::string> ContainerCredentialsUrlFromEnvironment() {
  std::string relative = http::EnvString("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  if (!relative.empty()) {
    if (relative[0] != '/') relative = "/" + relative;
    return kContainerHost + relative;
  }
  std::string full = http::EnvString("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (full.empty()) return std::string();
  if (full.substr(0, 8) == "https://") return full;
  if (full.substr(0, 7) == "http://") {
    std::string_view rest = std::string_view(full).substr(7);
    std::string_view host = rest.substr(0, rest.find('/'));
    if (host.size() > 0 && host.front() == '[') {
      host = host.substr(0, host.find(']') + 1);
    } else {
      host = host.substr(0, host.find(':'));
    }
    if (IsAllowedHttpHost(host)) return full;
  }
  return InvalidArgumentError("AWS_CONTAINER_CREDENTIALS_FULL_URI `" + full.substr(0, 200) +
                              "`: expected https://..., or http:// to a loopback address, "
                              "169.254.170.2 or 169.254.170.23");
}

std::shared_ptr<AwsCredentialProvider> ContainerCredentialsProvider(std::string url,
                                                                    std::shared_ptr<HttpClient> http,
                                                                    http::RetryPolicy retry) {
  std::string description = "the container credentials endpoint " + url;
  auto fetch = [url, http = std::move(http), retry, description]() -> Result<ExpiringAwsCredentials> {
    std::vector<std::string> headers = {"accept: application/json"};
    std::string token_file = http::EnvString("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    std::string token;
    if (!token_file.empty()) {
      Result<std::string> t = ReadSmallFile(token_file, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
      if (!t.ok()) return t.status().Annotate("fetching AWS credentials from " + description);
      token = *t;
    } else {
      token = http::EnvString("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    }
    for (char c : token) {
      if (c == '\r' || c == '\n') {
        return InvalidArgumentError("the container authorization token (" +
                                    (token_file.empty() ? std::string("AWS_CONTAINER_AUTHORIZATION_TOKEN")
                                                        : "file `" + token_file + "`") +
                                    ") has a line break");
      }
    }
    if (!token.empty()) headers.push_back("authorization: " + token);
    std::string op = "fetching AWS credentials from " + description;
    CAIRN_ASSIGN_OR_RETURN(std::string body, Request(*http, "GET", url, headers, op, retry));
    return ParseAwsCredentialsJson(body, op + " (GET " + url + ")");
  };
  return std::make_shared<AwsCredentialProvider>(std::move(description), std::move(fetch));
}

std::shared_ptr<AwsCredentialProvider> InstanceMetadataProvider(std::string endpoint,
                                                                std::shared_ptr<HttpClient> http,
                                                                http::RetryPolicy retry) {
  endpoint = StripSlash(std::move(endpoint));
  std::string description = "EC2 instance metadata at " + endpoint;
  auto fetch = [endpoint, http = std::move(http), retry, description]() -> Result<ExpiringAwsCredentials> {
    std::string op = "fetching AWS credentials from " + description;
    CAIRN_ASSIGN_OR_RETURN(std::string token,
                           Request(*http, "PUT", endpoint + kTokenPath,
                                   {"x-aws-ec2-metadata-token-ttl-seconds: 21600"}, op + ": session token",
                                   retry));
    if (token.empty() || token.find_first_of("\r\n") != std::string::npos) {
      return DataLossError(op + " (PUT " + endpoint + kTokenPath + "): the session token is empty or has a line break");
    }
    std::string header = "x-aws-ec2-metadata-token: " + token;
    CAIRN_ASSIGN_OR_RETURN(std::string roles, Request(*http, "GET", endpoint + kRolePath, {header},
                                                      op + ": the instance's role", retry));
    std::string role = roles.substr(0, roles.find('\n'));
    while (!role.empty() && (role.back() == '\r' || role.back() == ' ')) role.pop_back();
    if (role.empty() || role.find('/') != std::string::npos) {
      return DataLossError(op + " (GET " + endpoint + kRolePath + "): no role name in the answer");
    }
    std::string url = endpoint + kRolePath + http::UriEncode(role, false);
    CAIRN_ASSIGN_OR_RETURN(std::string body,
                           Request(*http, "GET", url, {header}, op + " for role `" + role + "`", retry));
    return ParseAwsCredentialsJson(body, op + " for role `" + role + "` (GET " + url + ")");
  };
  return std::make_shared<AwsCredentialProvider>(std::move(description), std::move(fetch));
}

namespace {
std::atomic<uint64_t> probes{0};
}  // namespace

uint64_t InstanceMetadataProbes() { return probes.load(); }

bool ProbeInstanceMetadata(const std::string& endpoint_in) {
  const std::string endpoint = StripSlash(endpoint_in);
  static std::mutex mu;
  static auto* found = new std::map<std::string, bool>();
  std::lock_guard<std::mutex> lock(mu);  // one probe at a time, once per endpoint
  if (auto it = found->find(endpoint); it != found->end()) return it->second;
  ++probes;
  http::HttpClientOptions o;
  o.max_in_flight = 1;
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.attempt_timeout = std::chrono::milliseconds(1000);
  HttpClient probe(o);
  http::RetryPolicy once;
  once.max_attempts = 1;
  Result<std::string> token = Request(probe, "PUT", endpoint + kTokenPath,
                                      {"x-aws-ec2-metadata-token-ttl-seconds: 21600"},
                                      "probing for EC2 instance metadata", once);
  bool ok = token.ok() && !token->empty() && token->find_first_of("\r\n") == std::string::npos;
  if (ok) {
    Result<std::string> roles = Request(probe, "GET", endpoint + kRolePath,
                                        {"x-aws-ec2-metadata-token: " + *token},
                                        "probing for an EC2 instance role", once);
    ok = roles.ok() && !roles->empty();
  }
  (*found)[endpoint] = ok;
  return ok;
}

}  // namespace cairn::s3
