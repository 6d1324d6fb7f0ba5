#include "cairn/kvstore/s3/aws_assume_role.h"

#include <ctime>

#include "cairn/kvstore/s3/aws_web_identity.h"
#include "cairn/kvstore/s3/sigv4.h"

namespace cairn::s3 {

std::shared_ptr<AwsCredentialProvider> AssumeRoleProvider(AssumeRoleConfig config,
                                                          std::shared_ptr<AwsCredentialProvider> source,
                                                          std::shared_ptr<http::HttpClient> http,
                                                          http::RetryPolicy retry) {
  std::string description = "role " + config.role_arn + " of " + config.where + " (STS " +
                            config.sts_endpoint + ", signed by " + source->description() + ")";
  auto fetch = [config = std::move(config), source = std::move(source), http = std::move(http),
                retry]() -> Result<ExpiringAwsCredentials> {
    const std::string op = "AssumeRole for role " + config.role_arn + " of " + config.where;
    Result<AwsCredentials> signer = source->Get();  // step 1
    if (!signer.ok()) return signer.status().Annotate(op + ": the source credentials");
    if (signer->anonymous()) return FailedPreconditionError(op + ": the source credentials are anonymous");
    // Step 2.
    std::string session = config.session_name;
    if (session.empty()) session = "cairn-" + std::to_string(std::time(nullptr));
    std::string form = http::FormEncode({{"Action", "AssumeRole"},
                                         {"Version", "2011-06-15"},
                                         {"RoleArn", config.role_arn},
                                         {"RoleSessionName", session}});
    if (!config.external_id.empty()) form += "&" + http::FormEncode({{"ExternalId", config.external_id}});
    if (config.duration_seconds > 0) {
      form += "&" + http::FormEncode({{"DurationSeconds", std::to_string(config.duration_seconds)}});
    }
    auto body = std::make_shared<std::string>(std::move(form));
    size_t scheme = config.sts_endpoint.find("://");
    std::string host = scheme == std::string::npos ? config.sts_endpoint : config.sts_endpoint.substr(scheme + 3);
    http::HttpCall call;
    call.request.method = "POST";
    call.request.url = config.sts_endpoint + "/";
    call.request.body = AsBytes(*body);
    call.keep_alive = body;
    call.operation = op;
    call.retry = retry;
    call.max_response_bytes = 1 << 20;
    const std::string payload_hash = Sha256Hex(AsBytes(*body));
    const AwsCredentials c = *signer;
    const std::string region = config.region.empty() ? "us-east-1" : config.region;
    call.prepare = [c, host, payload_hash, region](http::HttpRequest& r) {
      SigV4Input in;
      in.method = "POST";
      in.canonical_uri = "/";
      in.service = "sts";
      in.region = region;
      in.amz_date = AmzDateNow();
      in.payload_sha256 = payload_hash;
      in.headers = {{"content-type", "application/x-www-form-urlencoded"},
                    {"host", host},
                    {"x-amz-date", in.amz_date}};
      if (!c.session_token.empty()) in.headers.emplace_back("x-amz-security-token", c.session_token);
      for (const auto& [name, value] : in.headers) r.headers.push_back(name + ": " + value);
      r.headers.push_back("accept: application/xml");
      r.headers.push_back("authorization: " + SigV4Authorization(c, in));
      return Status::OK();
    };
    CAIRN_ASSIGN_OR_RETURN(http::HttpResponse r, http->Execute(call));
    if (r.status != 200) return FailedPreconditionError(std::string(http::HttpStatusError(call, r).message()));
    return ParseStsCredentials(r.body.as_string_view(), op + " (POST " + call.request.url + ")");
  };
  return std::make_shared<AwsCredentialProvider>(std::move(description), std::move(fetch));
}

}  // namespace cairn::s3
