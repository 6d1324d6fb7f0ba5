// Every call the engine makes into the Orbax layout, in one place (the
// layout's API is moving from paths to KvStore + prefix; only this file
// follows it).
//
// Thread safety: functions are independent; callers order them as the save
// protocol in save.h says.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/engine/save_plan.h"
#include "cairn/engine/save_request.h"
#include "cairn/kvstore/kvstore.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/zarr/metadata.h"

namespace cairn::engine {

// The locations of one save.
struct ItemPaths {
  std::string final_top;            // what the caller asked for (an absolute path)
  orbax::Location final_location;   // the same, opened
  std::string save_id;              // chosen by the primary, the same on every process
  orbax::PendingCommit top;         // `<final_top>.orbax-checkpoint-tmp-<id>`
  std::optional<orbax::PendingCommit> item;  // `<top>/<item>.orbax-checkpoint-tmp-<id>` (step layout)
  // Where the item's files go until the commit: the item's or the top's
  // pending location.
  const orbax::Location& item_tmp() const { return item ? item->location : top.location; }
};

// Opens the locations of `request` for save `save_id` (without touching
// storage beyond opening the store).
Result<ItemPaths> PathsFor(const SaveRequest& request, const std::string& save_id);

// The final directory of `request` as an absolute path.
std::string FinalTopOf(const SaveRequest& request);

// Primary only: creates the temporary directories (removing leftovers of
// other saves). AlreadyExists when the final directory exists. Nothing for
// a request the caller commits.
Status BeginItem(const SaveRequest& request, const ItemPaths& paths);

// After a save failed between BeginItem and FinalizeAndCommit (primary):
// its lease stops and its temporary directory goes (step 5 of step.h).
void AbandonItem(const SaveRequest& request, const ItemPaths& paths);

// The store this process writes its chunks (and, on the primary, the
// arrays' metadata) into: its own OCDBT database or the item directory.
Result<std::shared_ptr<KvStore>> OpenProcessStore(const SaveRequest& request, const ItemPaths& paths,
                                                  int process_index, int process_count);
// The same for a process named `process_name` (`ocdbt.process_<name>/`).
Result<std::shared_ptr<KvStore>> OpenProcessStore(const SaveRequest& request, const ItemPaths& paths,
                                                  const std::string& process_name);

// The Zarr metadata of array leaf `leaf` with chunk shape `chunk`, and
// whether to compress. `encode` is what chunks are encoded with; `stored`
// the metadata document text as Orbax writes it (v2: without zstd's
// `checksum` member, which TensorStore rejects; the frames still carry it).
struct ArrayFormat {
  ArrayMetadata encode;
  std::string stored_key;   // "zarr.json" / ".zarray"
  std::string stored_text;
};
Result<ArrayFormat> FormatFor(const SaveLeaf& leaf, const Shape& chunk, const SaveOptions& options,
                              bool compress);

// Writes `array_metadatas/process_<i>` (this process's view of the arrays).
Status WriteArrayMetadatas(const SaveRequest& request, const SavePlan& plan, const ItemPaths& paths,
                           int process_index);
// The same as `array_metadatas/process_<process_name>`.
Status WriteArrayMetadatas(const SaveRequest& request, const SavePlan& plan, const ItemPaths& paths,
                           const std::string& process_name);

// Primary only, after every process wrote its chunks and array metadatas:
// `_strings.json`, `_sharding`, `_METADATA`, the root OCDBT database,
// `_CHECKPOINT_METADATA`, and the commit (commit_success.txt + rename,
// innermost first); for a request the caller commits, only the item's files.
// `process_names` non-empty: the processes that wrote the item, by name, in
// place of 0..process_count-1 (orbax::ItemWriteOptions::process_names).
Status FinalizeAndCommit(const SaveRequest& request, const ItemPaths& paths, int process_count,
                         int64_t init_timestamp_nsecs,
                         const std::vector<std::string>& process_names = {});

// Nanoseconds since the epoch (the layout's clock).
int64_t Now();

}  // namespace cairn::engine
