// The GCS driver's URL grammar: `gs://bucket/path/` names the objects of a
// GCS bucket below path (percent-decoded); the endpoint
// (STORAGE_EMULATOR_HOST) and credentials come from the environment
// (gcs_kvstore.h).
//
// Thread safety: may be called concurrently.
#pragma once

#include <memory>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn::gcs {

// Opens `gs://<rest>` (the row of the driver table, drivers.cc).
// InvalidArgument quoting `url` for a bad bucket name or path; the errors of
// GcsOptions::FromEnvironment and GcsKvStore::Open.
Result<std::shared_ptr<KvStore>> OpenGcsUrl(std::string_view rest, std::string_view url);

}  // namespace cairn::gcs
