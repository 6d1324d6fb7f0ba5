// Credentials from the machine cairn runs on: the ECS/EKS container
// credentials endpoint and the EC2 instance metadata service (IMDSv2), both
// answering JSON {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}.
//
// Container endpoint (ECS tasks, Fargate, EKS Pod Identity), per fetch:
//   1. The URL: http://169.254.170.2 + AWS_CONTAINER_CREDENTIALS_RELATIVE_URI,
//      or AWS_CONTAINER_CREDENTIALS_FULL_URI as given (https, or http to a
//      loopback address, 169.254.170.2 or 169.254.170.23, as the SDKs allow).
//   2. GET it, with `Authorization:` the contents of
//      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at every fetch), else
//      AWS_CONTAINER_AUTHORIZATION_TOKEN, when either is set.
//
// EC2 instance metadata (IMDSv2), per fetch, at AWS_EC2_METADATA_SERVICE_ENDPOINT
// (default http://169.254.169.254):
//   1. PUT /latest/api/token with `X-aws-ec2-metadata-token-ttl-seconds:
//      21600`: a session token.
//   2. GET /latest/meta-data/iam/security-credentials/ with
//      `X-aws-ec2-metadata-token: <token>`: the role's name (first line).
//   3. GET /latest/meta-data/iam/security-credentials/<role>, the same header:
//      the credentials (and "Code": "Success").
// Whether an instance metadata service answers at all is probed once per
// process and endpoint (steps 1 and 2, one attempt, one second at most), so
// that off EC2 the chain falls through to anonymous quickly.
//
// Thread safety: all functions may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/s3/aws_credential_provider.h"

namespace cairn::s3 {

inline constexpr char kDefaultImdsEndpoint[] = "http://169.254.169.254";

// The container endpoint's URL from the environment ("" when neither
// variable is set); InvalidArgument for a FULL_URI the SDKs would refuse.
Result<std::string> ContainerCredentialsUrlFromEnvironment();

// The container endpoint at `url`; the Authorization header from the
// environment (see above), read at each fetch.
std::shared_ptr<AwsCredentialProvider> ContainerCredentialsProvider(std::string url,
                                                                    std::shared_ptr<http::HttpClient> http,
                                                                    http::RetryPolicy retry);

// EC2 instance metadata at `endpoint` ("http://host[:port]").
std::shared_ptr<AwsCredentialProvider> InstanceMetadataProvider(std::string endpoint,
                                                                std::shared_ptr<http::HttpClient> http,
                                                                http::RetryPolicy retry);

// Whether instance metadata at `endpoint` hands out a session token and has
// a role (once per process and endpoint; a second at most).
bool ProbeInstanceMetadata(const std::string& endpoint);

// Probes actually sent so far in this process (for tests: an emulator run
// must not probe 169.254.169.254).
uint64_t InstanceMetadataProbes();

}  // namespace cairn::s3
