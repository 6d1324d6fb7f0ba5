// Where the S3 driver finds the region of a bucket. The region signs every
// request (SigV4's credential scope) and, on AWS, names the host. In order:
//   1. AWS_REGION, then AWS_DEFAULT_REGION.
//   2. `region` in the profile (AWS_PROFILE, else `default`) of the config
//      file, AWS_CONFIG_FILE or ~/.aws/config (aws_shared_file.h). A file
//      that cannot be parsed is InvalidArgument naming its line.
//   3. The bucket itself: an unsigned HEAD of the bucket, at
//      https://<bucket>.s3.amazonaws.com/ (for a name with '.', which
//      virtual hosts cannot serve over TLS, https://s3.us-east-1.amazonaws.com/<bucket>),
//      or at <endpoint>/<bucket> when an endpoint is set. S3 names the
//      bucket's region in the `x-amz-bucket-region` header of its answer,
//      whatever the status (200, 301 and 403 alike). Asked once per process
//      for each endpoint and bucket; TensorStore's s3 driver asks the same.
//   4. An answer without that header: us-east-1 when an endpoint is set
//      (S3-compatible servers without regions); otherwise NotFound for a
//      404 (no such bucket) and FailedPrecondition for anything else, each
//      naming the bucket, the URL asked, its status and AWS_REGION.
#pragma once

#include <string>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/result.h"

namespace cairn::s3 {

// Steps 1 and 2: the configured region, or "" when none is.
Result<std::string> ConfiguredAwsRegion();

// Steps 3 and 4 through `client`. `endpoint`: "" for AWS, else the
// override (http(s)://host[:port], no trailing '/').
Result<std::string> DiscoverBucketRegion(http::HttpClient& client, const http::RetryPolicy& retry,
                                         const std::string& endpoint, const std::string& bucket);

}  // namespace cairn::s3
