// The one table of kvstore drivers and adapters (drivers.cc): URL scheme ->
// open function. The generic URL code (url.h) consults it; each driver's
// grammar and open function live in its own folder. Adding a driver: a new
// folder and one row (docs/ARCHITECTURE.md, "Adding a storage driver").
//
// Thread safety: the tables are constant.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

// A driver: the first part of a pipeline, "<scheme>://<rest>".
struct KvStoreDriver {
  std::string_view scheme;
  // The driver's folder below src/cairn/kvstore/ (where its grammar lives;
  // checked by driver_names_test.cc).
  std::string_view folder;
  // Opens "<scheme>://<rest>"; `url` is the whole URL, for errors.
  Result<std::shared_ptr<KvStore>> (*open)(std::string_view rest, std::string_view url);
  // The first path component names a bucket, not a key ("<scheme>://bucket"
  // is the bucket's root).
  bool bucket = false;
  // TensorStore's JSON spec {"driver": scheme, "path": p} means the URL
  // "<scheme>://p" (OpenKvStoreSpec).
  bool spec_is_path = false;
};

// An adapter: a later part of a pipeline, "<scheme>:<path>", over the store
// built so far.
struct KvStoreAdapter {
  std::string_view scheme;
  std::string_view folder;  // as KvStoreDriver::folder
  Result<std::shared_ptr<KvStore>> (*open)(std::shared_ptr<KvStore> base, std::string_view path,
                                           std::string_view url);
};

std::span<const KvStoreDriver> KvStoreDrivers();
std::span<const KvStoreAdapter> KvStoreAdapters();

}  // namespace cairn
