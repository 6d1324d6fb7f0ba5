// The file driver's URL grammar: `file:///abs/dir/` names the files under
// /abs/dir/ (created on first write), percent-decoded.
//
// Thread safety: every function may be called concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

// Opens `file://<rest>` (the row of the driver table, drivers.cc).
// InvalidArgument quoting `url` for a relative path or an invalid component.
Result<std::shared_ptr<KvStore>> OpenFileUrl(std::string_view rest, std::string_view url);

// The file URL of an absolute path: "file://" + path, as given (the caller
// escapes what needs escaping).
std::string FileUrl(std::string_view path);

// The path part of a one-part file URL ("file:///a/b" -> "/a/b", not
// decoded); nullopt for any other URL or a pipeline.
std::optional<std::string> FileUrlPath(std::string_view url);

}  // namespace cairn
