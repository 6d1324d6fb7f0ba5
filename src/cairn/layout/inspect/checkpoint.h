// Describing an Orbax checkpoint at a Location (any KvStore): what kind of directory it
// is (checkpoint root, step, item), its steps (finalized and uncommitted),
// its items and handlers, and the arrays of each PyTree item with their
// stored sizes. The front end of `cairn ls CKPT` and `cairn info CKPT`.
//
// A directory is an item when it holds `_METADATA` or any other file an
// Orbax PyTree item holds (`manifest.ocdbt`, `array_metadatas/`,
// `_sharding`, `ocdbt.process_<i>/`); a step when it holds
// `_CHECKPOINT_METADATA` or an item; a root when it holds steps (finalized
// or tmp).
//
// Thread safety: pure functions over the store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::inspect {

enum class CheckpointKind { kRoot, kStep, kItem };
const char* CheckpointKindName(CheckpointKind kind);

// A URL or path naming a local directory: "file:///a/b" -> "/a/b", "a/b"
// -> "a/b". nullopt for other schemes and pipelines ("...|ocdbt:").
std::optional<std::string> LocalPathOf(std::string_view url_or_path);

// What orbax::OpenLocation takes for `url_or_path`: LocalPathOf's path, or
// a plain memory://, s3:// or gs:// URL as it is. nullopt for pipelines and
// other schemes.
std::optional<std::string> CheckpointPathOf(std::string_view url_or_path);

// "ocdbt+zarr3", "ocdbt+zarr2", "dir+zarr3", "dir+zarr2".
const char* VariantName(orbax::StorageVariant v);

// True when `dir` holds any of the files of a PyTree item.
bool LooksLikeItem(const orbax::Location& dir);

// Classifies `loc`. NotFound when it is none of the three.
Result<CheckpointKind> ClassifyCheckpoint(const orbax::Location& loc);

struct ArrayEntry {
  std::string path;  // the param name (tree path joined with '.'), item-prefixed when asked
  DType dtype = DType::kFloat32;
  Shape shape;
  Shape chunks;        // the stored chunk (shard) shape
  uint64_t bytes = 0;  // stored bytes of all the array's keys (chunks and metadata)
};

// The arrays of an opened item, in `_METADATA` order; each path is
// `path_prefix` + param name. Errors name the array.
Result<std::vector<ArrayEntry>> ListItemArrays(const orbax::OrbaxItem& item,
                                               const std::string& path_prefix = "");

struct StepEntry {
  std::string name;  // directory name
  std::optional<int64_t> step;
  bool finalized = false;  // false: an `.orbax-checkpoint-tmp` directory
};

struct ItemInfo {
  std::string name;     // directory name ("" when the checkpoint is an item)
  std::string dir;      // absolute
  std::string handler;  // from _CHECKPOINT_METADATA, else "" (unknown)
  bool is_pytree = false;
  std::string variant;  // "ocdbt+zarr3", ... (PyTree items)
  Json custom_metadata;
  std::vector<ArrayEntry> arrays;
  uint64_t total_bytes = 0;
  std::string error;  // why the item could not be read, if it could not
};

struct CheckpointInfo {
  std::string path;
  orbax::Location location;
  CheckpointKind kind = CheckpointKind::kItem;
  std::vector<StepEntry> steps;  // kRoot: every step directory found
  std::string step_dir;          // the step described (root: the latest finalized)
  orbax::Location step_location; // the same as a location (store null when none)
  Json step_metadata;            // _CHECKPOINT_METADATA as stored, or null
  Json root_metadata;            // metadata/_ROOT_METADATA, or null
  std::vector<ItemInfo> items;
};

// The step directories under `root` (names that parse as steps, finalized
// or tmp), sorted by step then name.
Result<std::vector<StepEntry>> ListStepEntries(const orbax::Location& root);

// The item directories of `step`, sorted: every non-tmp subdirectory.
Result<std::vector<std::string>> ListItemNames(const orbax::Location& step);

// Describes the checkpoint at `loc` (a root: its latest finalized step).
// Items that cannot be read are described with `error` set instead of
// failing. NotFound when `loc` is no Orbax checkpoint.
Result<CheckpointInfo> DescribeCheckpoint(const orbax::Location& loc);

}  // namespace cairn::inspect
