// The OCDBT adapter's URL grammar (TensorStore's):
//
//   <base>|ocdbt:[path]          the OCDBT database stored in <base>, rooted
//                                at path
//   <base>|ocdbt:@v5/[path]      its generation 5, read-only (`@<commit
//                                time>/` is Unimplemented; a literal '@' in a
//                                path is written %40)
//
// A database created through a URL gets TensorStore's default config.
//
// Thread safety: may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn::ocdbt {

// Applies `ocdbt:<path>` over `base` (the row of the adapter table,
// drivers.cc). InvalidArgument quoting `url` for a bad path or version,
// Unimplemented for a commit-time version; the errors of opening the
// database.
Result<std::shared_ptr<KvStore>> OpenOcdbtUrl(std::shared_ptr<KvStore> base, std::string_view path,
                                              std::string_view url);

}  // namespace cairn::ocdbt
