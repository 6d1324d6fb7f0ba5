// Opening and creating zarr arrays from URLs in TensorStore's pipeline
// syntax, parsed the way TensorStore 0.1.86 parses them:
//
//   file:///ckpt/a/|zarr3:              zarr v3 array whose zarr.json is /ckpt/a/zarr.json
//   file:///ckpt/|zarr3:a               the same (the driver part may carry a path,
//                                       joined to the kvstore path with '/')
//   memory://x/|zarr2:                  zarr v2 array (`.zarray`) in the memory store
//   file:///db/|ocdbt:params.w/|zarr3:  an array inside an OCDBT database
//   file:///ckpt/a/   or   file:///ckpt/a   no driver part: the format is
//                                       detected (zarr.json -> v3, else .zarray -> v2)
//
// With a driver part the array path names a directory (TensorStore's
// EnsureDirectoryPath: a '/' is appended when missing). Without one the
// kvstore URL is kept as written ("file:///ckpt/a" stays so, as
// ts.Spec("file:///ckpt/a") keeps it), and the array is looked for in that
// directory, as TensorStore's format detection does. "zarr3://p" means path
// "p". Query strings and fragments are rejected, as TensorStore does;
// "zarr:" is not a scheme TensorStore accepts in URLs, so neither does
// cairn. A first pipeline component without a scheme ("/ckpt/a",
// "/ckpt/a/|zarr2:") is rejected, as TensorStore rejects it: callers that
// take local paths (the CLI, the Python API) turn them into file:// URLs
// with NormalizeUrl first.
//
// Thread safety: pure functions, plus whatever OpenKvStore and ZarrArray do.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/util/json.h"
#include "cairn/result.h"
#include "cairn/zarr/array.h"
#include "cairn/zarr/metadata.h"

namespace cairn {

// A parsed array URL.
struct ArrayUrl {
  // The kvstore pipeline rooted at the array's directory (the array prefix
  // folded into its last component), e.g. "file:///ckpt/a/" or
  // "file:///db/|ocdbt:params.w/". Array keys are relative to it.
  std::string kvstore_url;
  // The format the URL names; nullopt when it has no driver part.
  std::optional<ZarrFormat> format;
};

// Turns a local path into a file:// URL: leaves a string that already starts
// with a URL scheme ("file:", "memory:", ...) alone, makes a relative path
// absolute, and percent-encodes '%', '|', '?' and '#' in the path. Applies
// to the first pipeline component only ("/db/|ocdbt:" -> "file:///db/|ocdbt:").
std::string NormalizeUrl(std::string_view url_or_path);

// Parses an array URL (see the file comment). InvalidArgument, quoting the
// URL, for an empty URL, a first part without a URL scheme (a bare path), a
// driver part that is not last, a driver part with a query or fragment, or
// a driver part with no kvstore before it.
Result<ArrayUrl> ParseArrayUrl(std::string_view url);

// Opens the array `url` names. NotFound (naming the URL) when there is no
// metadata of the requested (or any, when detecting) format there; other
// errors as ZarrArray::Open and OpenKvStore return them, annotated with the
// URL.
Result<std::shared_ptr<ZarrArray>> OpenZarrArray(std::string_view url);

// Creates an array at `url` from full or partial metadata (the fields of
// zarr.json or .zarray; see ZarrArray::Create). The format comes from the
// URL's driver part; without one, from the metadata's "zarr_format" member,
// and InvalidArgument when neither says. A driver part that contradicts
// "zarr_format" is InvalidArgument.
Result<std::shared_ptr<ZarrArray>> CreateZarrArray(std::string_view url, const Json& metadata,
                                                   const CreateOptions& options = {});

// CreateZarrArray from the metadata's JSON text. Errors: InvalidArgument
// naming `metadata` for text that is not JSON; else CreateZarrArray's.
Result<std::shared_ptr<ZarrArray>> CreateZarrArrayFromJson(std::string_view url, std::string_view metadata_json,
                                                           const CreateOptions& options = {});

}  // namespace cairn
