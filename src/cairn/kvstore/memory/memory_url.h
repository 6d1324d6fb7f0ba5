// The memory driver's URL grammar: `memory://[path]` names the process-wide
// in-memory store (MemoryKvStore::Default) under path, percent-decoded.
//
// Thread safety: every function may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

// Opens `memory://<rest>` (the row of the driver table, drivers.cc).
// InvalidArgument quoting `url` for an invalid path.
Result<std::shared_ptr<KvStore>> OpenMemoryUrl(std::string_view rest, std::string_view url);

// The memory URL of a key prefix: "memory://" + prefix, as given.
std::string MemoryUrl(std::string_view prefix);

}  // namespace cairn
