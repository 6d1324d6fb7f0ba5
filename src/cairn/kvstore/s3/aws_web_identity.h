// Web identity credentials (EKS IAM roles for service accounts): the token
// in AWS_WEB_IDENTITY_TOKEN_FILE is exchanged at STS for temporary
// credentials of AWS_ROLE_ARN, as the AWS SDKs do:
//   1. Read the token file (again at every refresh: the kubelet rotates it).
//   2. POST to the STS endpoint (AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL,
//      else https://sts.<region>.amazonaws.com when a region is set, else
//      https://sts.amazonaws.com) the form Action=AssumeRoleWithWebIdentity,
//      Version=2011-06-15, RoleArn, RoleSessionName (AWS_ROLE_SESSION_NAME,
//      else "cairn-<unix time>"), WebIdentityToken. The request is not
//      signed (the token is the proof); it is retried like any idempotent
//      request.
//   3. Read AccessKeyId, SecretAccessKey, SessionToken and Expiration from
//      <Credentials> of the XML answer.
//
// Thread safety: pure functions; the provider is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/s3/aws_credential_provider.h"

namespace cairn::s3 {

struct WebIdentityConfig {
  std::string token_file;
  std::string role_arn;
  std::string session_name;  // "" -> "cairn-<unix time>"
  std::string sts_endpoint;  // "http(s)://host[:port]" (no path)
};

// The STS endpoint the environment gives for `region` ("" for none).
std::string StsEndpointFromEnvironment(const std::string& region);

// <Credentials> of an STS answer (AssumeRoleWithWebIdentityResponse,
// AssumeRoleResponse); DataLoss naming `where` when a field is missing or
// the Expiration is malformed.
Result<ExpiringAwsCredentials> ParseStsCredentials(std::string_view xml, std::string_view where);

std::shared_ptr<AwsCredentialProvider> WebIdentityProvider(WebIdentityConfig config,
                                                           std::shared_ptr<http::HttpClient> http,
                                                           http::RetryPolicy retry);

}  // namespace cairn::s3
