// The S3 driver's URL grammar: `s3://bucket/path/` names the objects of an
// S3 bucket below path (percent-decoded); endpoint, region and credentials
// come from the environment (s3_kvstore.h).
//
// Thread safety: may be called concurrently.
#pragma once

#include <memory>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn::s3 {

// Opens `s3://<rest>` (the row of the driver table, drivers.cc).
// InvalidArgument quoting `url` for a bad bucket name or path; the errors of
// S3Options::FromEnvironment and S3KvStore::Open.
Result<std::shared_ptr<KvStore>> OpenS3Url(std::string_view rest, std::string_view url);

}  // namespace cairn::s3
