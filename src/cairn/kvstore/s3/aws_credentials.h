// Where the S3 driver finds its credentials, in this order (the order of the
// AWS SDK for C++'s and for Rust's default chains; env and the shared file
// first, then the temporary credentials of the machine):
//   1. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN);
//      one of the pair without the other is InvalidArgument.
//   2. The profile AWS_PROFILE (default "default") of the shared files:
//      an assumed role (role_arn + source_profile), the credentials file's
//      keys, credential_process, the config file's keys, in that order
//      (aws_profile.h). A file that cannot be parsed, a profile with a key
//      id but no secret, or an AWS_PROFILE that neither file has is
//      InvalidArgument naming the file(s).
//   3. Web identity (EKS IRSA): AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN
//      (the file without the role is InvalidArgument); aws_web_identity.h.
//   4. The container endpoint (ECS, Fargate, EKS Pod Identity):
//      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI;
//      aws_instance_metadata.h.
//   5. EC2 instance metadata (IMDSv2), unless AWS_EC2_METADATA_DISABLED is
//      "true": at AWS_EC2_METADATA_SERVICE_ENDPOINT, or at 169.254.169.254
//      unless an S3 endpoint (an emulator) is set, when a probe (once per
//      process, a second at most) finds a service with a role.
//   6. None: anonymous (requests are not signed), which public buckets and
//      most emulators accept.
// Keys (1, 2) never expire. A process (2) may; roles (2) and 3 to 5 are temporary: the store asks the provider
// (aws_credential_provider.h) per request, which refreshes them before they
// expire. Providers of processes, roles and 3 to 5 are shared by the stores of a process opened under
// the same environment (one cache, one refresh).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cairn/kvstore/s3/aws_credential_provider.h"
#include "cairn/kvstore/s3/sigv4.h"
#include "cairn/result.h"

namespace cairn::s3 {

// Step 1: the keys of the environment (anonymous when none are set).
Result<AwsCredentials> EnvironmentAwsCredentials();

// Steps 1 to 6. `emulator`: an S3 endpoint is set (step 5 then probes only
// an endpoint named by AWS_EC2_METADATA_SERVICE_ENDPOINT); `region` picks the
// regional STS endpoint of step 3.
Result<std::shared_ptr<AwsCredentialProvider>> AwsCredentialProviderFromEnvironment(
    bool emulator, const std::string& region);

// Parses an INI credentials file's text; `path` is for messages. Returns
// anonymous credentials when `profile` is absent and `profile_required` is
// false, or when it holds no keys.
Result<AwsCredentials> ParseAwsCredentialsFile(std::string_view text, std::string_view path,
                                               std::string_view profile, bool profile_required,
                                               std::string_view what = "AWS credentials file");

}  // namespace cairn::s3
