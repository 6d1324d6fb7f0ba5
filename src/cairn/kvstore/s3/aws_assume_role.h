// Credentials of an assumed role (a profile's `role_arn`, aws_profile.h), as
// the AWS CLI and SDKs get them:
//   1. Get the source credentials (another provider: the source profile's
//      keys, process or role).
//   2. POST to the STS endpoint (StsEndpointFromEnvironment) the form
//      Action=AssumeRole, Version=2011-06-15, RoleArn, RoleSessionName
//      (else "cairn-<unix time>"), and ExternalId / DurationSeconds when set,
//      signed with SigV4 (service `sts`, the store's region, else
//      us-east-1) by the source credentials.
//   3. Read <Credentials> of the XML answer (ParseStsCredentials). They
//      expire; the provider (aws_credential_provider.h) assumes the role
//      again before they do.
// A refusal (4xx) is FailedPrecondition naming the role, the profile, the
// URL and STS's answer; transient failures are retried as any idempotent
// request.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/s3/aws_credential_provider.h"

namespace cairn::s3 {

struct AssumeRoleConfig {
  std::string role_arn;
  std::string session_name;  // "" -> "cairn-<unix time>"
  std::string external_id;   // "" -> none
  uint64_t duration_seconds = 0;  // 0 -> none (STS's default)
  std::string sts_endpoint;  // "http(s)://host[:port]" (no path)
  std::string region;        // signing region; "" -> us-east-1
  std::string where;         // the profile, for messages
};

std::shared_ptr<AwsCredentialProvider> AssumeRoleProvider(AssumeRoleConfig config,
                                                          std::shared_ptr<AwsCredentialProvider> source,
                                                          std::shared_ptr<http::HttpClient> http,
                                                          http::RetryPolicy retry);

}  // namespace cairn::s3
