// Where the S3 driver finds its credentials, in this order (as the AWS tools):
//   1. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN);
//      one of the pair without the other is InvalidArgument.
//   2. The shared credentials file, AWS_SHARED_CREDENTIALS_FILE or
//      ~/.aws/credentials, profile AWS_PROFILE (default "default"). A file that
//      cannot be parsed, a profile with a key id but no secret, or an
//      AWS_PROFILE the file does not have is InvalidArgument naming the file.
//   3. None: anonymous (requests are not signed), which public buckets and
//      most emulators accept.
#pragma once

#include <string>
#include <string_view>

#include "cairn/kvstore/s3/sigv4.h"
#include "cairn/util/result.h"

namespace cairn::s3 {

Result<AwsCredentials> LoadAwsCredentials();

// Parses an INI credentials file's text; `path` is for messages. Returns
// anonymous credentials when `profile` is absent and `profile_required` is
// false.
Result<AwsCredentials> ParseAwsCredentialsFile(std::string_view text, std::string_view path,
                                               std::string_view profile, bool profile_required);

}  // namespace cairn::s3
