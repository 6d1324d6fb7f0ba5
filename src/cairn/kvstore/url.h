// Opening a KvStore from a URL in TensorStore's pipeline syntax.
//
//   memory://[path]              the process-wide in-memory store, under path
//   file:///abs/dir/             files under /abs/dir/ (created on first write)
//   s3://bucket/path/            S3 objects (s3/s3_kvstore.h)
//   gs://bucket/path/            GCS objects (gcs/gcs_kvstore.h)
//   <base>|ocdbt:[path]          an OCDBT database stored in <base>
//   <base>|ocdbt:@v5/[path]      its generation 5, read-only (TensorStore's
//                                syntax; `@<commit time>/` is Unimplemented,
//                                a literal '@' in a path is written %40)
//
// The returned store is rooted at the URL's path: its keys are relative to
// it. Driver and adapter schemes are listed explicitly in url.cc.
//
// Thread safety: OpenKvStore may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

// Splits a pipeline URL at its '|' separators: "file:///a/|ocdbt:p/|zarr3:"
// -> {"file:///a/", "ocdbt:p/", "zarr3:"}. InvalidArgument for empty parts.
Result<std::vector<std::string>> SplitUrlPipeline(std::string_view url);

// Opens the store a kvstore URL (no array driver part) names. InvalidArgument
// for an unknown scheme or a malformed URL; the message quotes the URL.
Result<std::shared_ptr<KvStore>> OpenKvStore(std::string_view url);

// For drivers and adapters: turns the path of a URL part ("a/b", "a/b/",
// "a%20b/", "") into a key prefix: percent-decoded, "" or ending in '/', each
// component a valid key component. InvalidArgument quoting `url` otherwise.
Result<std::string> UrlPathToKeyPrefix(std::string_view encoded_path, std::string_view url);

}  // namespace cairn
