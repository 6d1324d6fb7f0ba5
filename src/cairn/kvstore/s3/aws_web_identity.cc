#include "cairn/kvstore/s3/aws_web_identity.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "cairn/kvstore/http/environment.h"
#include "cairn/kvstore/s3/s3_xml.h"

namespace cairn::s3 {
namespace {

constexpr size_t kMaxTokenFile = 1 << 20;

Result<std::string> ReadTokenFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return NotFoundError("web identity token file `" + path +
                         "` (AWS_WEB_IDENTITY_TOKEN_FILE) cannot be opened: " + std::strerror(errno));
  }
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && text.size() <= kMaxTokenFile) text.append(buf, n);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return UnavailableError("web identity token file `" + path + "`: read error");
  if (text.size() > kMaxTokenFile) {
    return InvalidArgumentError("web identity token file `" + path + "` is larger than 1 MiB");
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty()) return InvalidArgumentError("web identity token file `" + path + "` is empty");
  return text;
}

}  // namespace

std::string StsEndpointFromEnvironment(const std::string& region) {
  std::string e = http::EnvString("AWS_ENDPOINT_URL_STS");
  if (e.empty()) e = http::EnvString("AWS_ENDPOINT_URL");
  if (e.empty()) e = region.empty() ? "https://sts.amazonaws.com" : "https://sts." + region + ".amazonaws.com";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

Result<ExpiringAwsCredentials> ParseStsCredentials(std::string_view xml, std::string_view where) {
  std::vector<std::string_view> creds = XmlElements(xml, "Credentials");
  if (creds.size() != 1) {
    return DataLossError(std::string(where) + ": the answer has " + std::to_string(creds.size()) +
                         " <Credentials> elements, expected one");
  }
  auto field = [&](const char* tag) -> Result<std::string> {
    std::optional<std::string> v = XmlText(creds[0], tag);
    if (!v || v->empty()) {
      return DataLossError(std::string(where) + ": <Credentials> has no <" + tag + ">");
    }
    return *v;
  };
  ExpiringAwsCredentials out;
  CAIRN_ASSIGN_OR_RETURN(out.credentials.access_key_id, field("AccessKeyId"));
  CAIRN_ASSIGN_OR_RETURN(out.credentials.secret_access_key, field("SecretAccessKey"));
  CAIRN_ASSIGN_OR_RETURN(out.credentials.session_token, field("SessionToken"));
  CAIRN_ASSIGN_OR_RETURN(std::string expiration, field("Expiration"));
  Result<WallClock::time_point> t = ParseAwsTimestamp(expiration, std::string(where) + ": <Expiration>");
  if (!t.ok()) return DataLossError(std::string(t.status().message()));
  out.expiration = *t;
  out.credentials.source = std::string(where);
  return out;
}

std::shared_ptr<AwsCredentialProvider> WebIdentityProvider(WebIdentityConfig config,
                                                           std::shared_ptr<http::HttpClient> http,
                                                           http::RetryPolicy retry) {
  std::string description = "web identity (role " + config.role_arn + ", token file `" +
                            config.token_file + "`, STS " + config.sts_endpoint + ")";
  auto fetch = [config = std::move(config), http = std::move(http), retry]() -> Result<ExpiringAwsCredentials> {
    CAIRN_ASSIGN_OR_RETURN(std::string token, ReadTokenFile(config.token_file));
    std::string session = config.session_name;
    if (session.empty()) session = "cairn-" + std::to_string(std::time(nullptr));
    auto body = std::make_shared<std::string>(http::FormEncode({{"Action", "AssumeRoleWithWebIdentity"},
                                                          {"Version", "2011-06-15"},
                                                          {"RoleArn", config.role_arn},
                                                          {"RoleSessionName", session},
                                                          {"WebIdentityToken", token}}));
    http::HttpCall call;
    call.request.method = "POST";
    call.request.url = config.sts_endpoint + "/";
    call.request.headers = {"content-type: application/x-www-form-urlencoded", "accept: application/xml"};
    call.request.body = AsBytes(*body);
    call.keep_alive = body;
    call.operation = "AssumeRoleWithWebIdentity for role " + config.role_arn + " (token file `" +
                     config.token_file + "`)";
    call.retry = retry;
    call.max_response_bytes = 1 << 20;
    CAIRN_ASSIGN_OR_RETURN(http::HttpResponse r, http->Execute(call));
    if (r.status != 200) {
      // Refused (an expired or foreign token, a role that does not trust the
      // identity provider): the configuration is at fault, not the network.
      return FailedPreconditionError(std::string(http::HttpStatusError(call, r).message()));
    }
    return ParseStsCredentials(r.body.as_string_view(), call.operation + " (POST " + call.request.url + ")");
  };
  return std::make_shared<AwsCredentialProvider>(std::move(description), std::move(fetch));
}

}  // namespace cairn::s3
