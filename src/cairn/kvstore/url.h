// Opening a KvStore from a URL in TensorStore's pipeline syntax:
//
//   <driver>://<rest>[|<adapter>:<path>]...
//
// The first part names a driver, each later part an adapter applied over the
// store built so far. This file is the generic part: it splits the pipeline
// and looks each scheme up in the one table of drivers and adapters
// (drivers.h). Each driver's own grammar (what `<rest>` means) lives in its
// folder: file/file_url.h, memory/memory_url.h, s3/s3_url.h, gcs/gcs_url.h,
// ocdbt/io/ocdbt_url.h.
//
// The returned store is rooted at the URL's path: its keys are relative to
// it.
//
// Thread safety: every function may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

// Splits a pipeline URL at its '|' separators: "a://x/|b:p/|c:" ->
// {"a://x/", "b:p/", "c:"}. InvalidArgument for empty parts.
Result<std::vector<std::string>> SplitUrlPipeline(std::string_view url);

// Opens the store a kvstore URL (no array driver part) names. InvalidArgument
// for an unknown scheme or a malformed URL; the message quotes the URL.
Result<std::shared_ptr<KvStore>> OpenKvStore(std::string_view url);

// True when `url` is one part, `<scheme>://...`, of a driver in the table.
bool IsKvStoreDriverUrl(std::string_view url);

// The URL forms of every driver, for messages: "file://, memory://, s3:// or
// gs://" (table order).
std::string KvStoreDriverUrlForms();

// Opens the store of TensorStore's JSON spec {"driver": driver, "path": path}
// for drivers whose spec is that pair (KvStoreDriver::spec_is_path).
// InvalidArgument naming the supported drivers otherwise.
Result<std::shared_ptr<KvStore>> OpenKvStoreSpec(std::string_view driver, std::string_view path);

// A driver URL split at its last path component, for layouts that create the
// directory a URL names (the store must be rooted above it).
struct ParentKvStore {
  std::shared_ptr<KvStore> store;  // rooted at the parent
  std::string name;                // the last component + '/', or "" for a root
  std::string url;                 // the parent's URL (the store's url())
};
// Opens the parent of the directory a one-part driver URL names:
// "<scheme>://a/b/" -> the store of "<scheme>://a/" and name "b/" (the last
// component percent-decoded; an escaped '/' in it is InvalidArgument). For
// drivers whose first component is a bucket, "<scheme>://bucket" is the
// bucket's root with name "". InvalidArgument for an unknown scheme or a
// pipeline; the store's errors otherwise.
Result<ParentKvStore> OpenParentKvStore(std::string_view url);

// For drivers and adapters: "invalid kvstore URL `<url>`: <why>".
Status InvalidKvStoreUrl(std::string_view url, std::string_view why);

// For drivers and adapters: decodes %XX escapes of a URL part.
// InvalidArgument quoting `url` for a malformed escape or a NUL byte.
Result<std::string> PercentDecodeUrlPart(std::string_view s, std::string_view url);

// For drivers and adapters: turns the path of a URL part ("a/b", "a/b/",
// "a%20b/", "") into a key prefix: percent-decoded, "" or ending in '/', each
// component a valid key component. InvalidArgument quoting `url` otherwise.
Result<std::string> UrlPathToKeyPrefix(std::string_view encoded_path, std::string_view url);

}  // namespace cairn
