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

// The one way a path a user wrote becomes a location (orbax::OpenLocation,
// engine::OpenUserLocation and NormalizeUrl all start here):

// `path` made absolute against the working directory and normalized
// lexically ("a/./b/../c" -> "/cwd/a/c"); a trailing '/' the user wrote is
// kept. Symlinks are not resolved.
std::string AbsoluteUserPath(std::string_view path);

// AbsoluteUserPath with the longest existing part resolved by realpath
// (symlinks the user named are followed here, once), and no trailing '/'.
std::string ResolvedUserPath(std::string_view path);

// The file URL of an absolute path, with the characters a URL gives a
// meaning to ('%', '|', '?', '#') percent-encoded, so that opening it names
// exactly `absolute_path`.
std::string FileUrlOfPath(std::string_view absolute_path);

}  // namespace cairn
