// Opening the storage of an Orbax item directory, and reading an item.
//
// An item is one of four variants: OCDBT (root `manifest.ocdbt`, possibly
// referring into `ocdbt.process_<i>/`) or one directory per array, each
// with Zarr v3 or v2 arrays. `_METADATA` says which (`use_ocdbt`,
// `use_zarr3`); when it does not, the presence of `manifest.ocdbt` decides
// OCDBT and each array's metadata key decides the Zarr version.
//
// Thread safety: an OrbaxItem is immutable after OpenItem; its store and
// arrays may be used from any thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/tree_metadata.h"
#include "cairn/zarr/array.h"

namespace cairn::orbax {

enum class StorageVariant { kOcdbtZarr3, kOcdbtZarr2, kDirZarr3, kDirZarr2 };
const char* StorageVariantName(StorageVariant v);

// The store process `process_index` writes its chunks into: a view of the
// item location itself (per-array directories) or its own OCDBT database
// `ocdbt.process_<i>/` (also for a single process, as Orbax does), both on
// the item location's store.
// `value_alignment`: OcdbtOptions::value_alignment of that database.
Result<std::shared_ptr<KvStore>> OpenItemWriteStore(const Location& item, bool use_ocdbt,
                                                    int process_index, int process_count,
                                                    uint64_t value_alignment = 0);
// The same for a process named `process_name` (`ocdbt.process_<name>/`;
// Orbax's Pathways controller is "pwcontroller").
Result<std::shared_ptr<KvStore>> OpenItemWriteStore(const Location& item, bool use_ocdbt,
                                                    const std::string& process_name,
                                                    uint64_t value_alignment = 0);

// Builds the root OCDBT database of an item from the per-process databases
// `ocdbt.process_0..N-1` with MergeOcdbtDatabases: the root refers into
// them, so they must be kept. The root manifest is written last.
Status BuildRootDatabase(const Location& item, int process_count);
// The same over the databases `ocdbt.process_<name>` of `process_names`.
Status BuildRootDatabase(const Location& item, const std::vector<std::string>& process_names);

struct OrbaxItem {
  std::string dir;    // item.location.Path(), for messages
  Location location;  // the item directory
  TreeMetadata metadata;
  bool use_ocdbt = true;
  bool use_zarr3 = false;
  std::map<std::string, std::string> strings;                  // `_strings.json`
  std::map<std::string, std::string> shardings;                // `_sharding`
  std::map<std::string, ArrayMetadataRecord> array_metadatas;  // merged over processes
  std::shared_ptr<KvStore> store;  // keys `<param>/<zarr key>`

  StorageVariant variant() const;
};

// Opens the item at `item`. Errors: NotFound when there is no
// `_METADATA`; InvalidArgument / DataLoss for malformed metadata files,
// naming the file; ResourceExhausted for a metadata file over
// kMaxSmallFileBytes.
Result<OrbaxItem> OpenItem(const Location& item);

// Opens the array of `param`. NotFound naming the param and item when it
// has neither `zarr.json` nor `.zarray`.
Result<std::shared_ptr<ZarrArray>> OpenItemArray(const OrbaxItem& item, const std::string& param);

// Resolves what a user calls a checkpoint to an item directory: an item
// directory (holds `_METADATA`) is returned as is; a step directory gives
// its item `item_name`, else `default`, else its only item; a checkpoint
// root gives the latest finalized step's item. NotFound / InvalidArgument
// (several items, none named) say what was found at `location`.
Result<Location> ResolveItemLocation(const Location& location, const std::string& item_name = "");

}  // namespace cairn::orbax
