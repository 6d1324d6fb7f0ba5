// SaveRequest: what one process hands the engine to save a checkpoint.
//
// Runtime-agnostic: a jax job, a colocated-Python function on Pathways, a
// PyTorch job or an MPI program describe their arrays with plain host
// buffers. Every process of a job builds a request with the same leaves (same
// paths, shapes, dtypes, write shapes, in the same order) and its own shards.
//
// A shard is a box of the global array held by this process: a host buffer
// (base pointer at the box's first element, byte strides per dimension, or
// C-contiguous when the strides are empty) and a replica id. Shards with the
// same box on different devices/processes are replicas, numbered 0 ..
// num_replicas-1; the engine decides which of them this process writes
// (save_plan.h). The buffers must stay valid and unchanged until StartSave
// returns (not until the save is durable: the engine snapshots them), except
// shards marked `immutable`: their buffers stay valid and unchanged until
// the save is finished (PendingSave::Wait returned), as a jax.Array's do,
// and the engine reads them in the background instead of copying them
// before StartSave returns (what Orbax does with arrays already on the host).
//
// Thread safety: plain value types.
#pragma once

#include <chrono>
#include <map>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/interrupt.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/sharding.h"
#include "cairn/layout/orbax/tree_metadata.h"
#include "cairn/util/box.h"
#include "cairn/util/json.h"

namespace cairn::engine {

struct ShardToSave {
  Box box;                          // in global array coordinates
  const void* data = nullptr;       // element at box.origin
  std::vector<Index> byte_strides;  // empty: C-contiguous over box.shape
  int replica_id = 0;
  // The buffer outlives the save and never changes: no snapshot is taken
  // before StartSave returns (see above).
  bool immutable = false;
};

// One leaf of the tree, in the tree's flattening order. Array leaves have
// an array value type (orbax::kJaxArray, kNumpyArray, kScalar); the others
// (strings, None, empty containers) only carry their path and value.
struct SaveLeaf {
  orbax::KeyPath path;
  std::string value_type = std::string(orbax::kJaxArray);
  // Arrays:
  DType dtype = DType::kFloat32;
  Shape shape;
  Shape write_shape;  // the shard shape of the sharding; empty: shape
  int num_replicas = 1;
  std::vector<ShardToSave> shards;  // this process's shards (may be none)
  std::optional<std::string> random_key_impl;
  // For `_sharding`: the sharding's facts, formatted as Orbax writes them
  // (layout/orbax/sharding.h); or `sharding_json`, text already in that form.
  // `sharding` wins when both are set.
  std::optional<orbax::ShardingMetadata> sharding;
  std::optional<std::string> sharding_json;
  // Strings:
  std::string string_value;
};

enum class Compression {
  kOrbaxDefault,  // zstd with Orbax's settings (v3: level 3 inside shards; v2: level 1)
  kNone,          // no compressor
  kAuto,          // per array: zstd unless a sample shrinks by less than ~10%
};

struct SaveOptions {
  bool use_ocdbt = true;
  bool use_zarr3 = true;
  // Replicated shards are split among their replicas (save_plan.h); off:
  // replica 0 writes each shard whole. The result is the same either way.
  bool replica_parallel = true;
  Compression compression = Compression::kOrbaxDefault;
  // Bytes of host memory the engine may own at once (snapshots and encoded
  // chunks); 0 = ByteBudget::kDefaultBytes.
  uint64_t memory_budget_bytes = 0;
  // OCDBT data files are started anew past this size; chunks larger than
  // it are split (Orbax's rule). 0 = unlimited.
  uint64_t target_data_file_size = uint64_t{1} << 31;
  // Upper bound on a chunk's bytes (Orbax's chunk_byte_size); 0 = none.
  uint64_t chunk_byte_size = 0;
  Json custom_metadata;  // `_METADATA` custom_metadata (null by default)
  // Called with (bytes of this process's chunks written, their total), now
  // and then and once at the end (progress.h); may be empty.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
  // Requested: the save stops at its next chunk, before its commit
  // (kCancelled). May be null.
  const Interrupt* interrupt = nullptr;
  // Non-empty: this process's database and array metadata file are named
  // after it (`ocdbt.process_<name>/`, `array_metadatas/process_<name>`)
  // instead of an index: Orbax's Pathways controller saves its numpy arrays
  // and scalars as "pwcontroller" (engine/colocated.h).
  std::string process_name;
  // Pathways colocated Python (engine/colocated.h): this process writes its
  // chunks and, when it holds jax.Array leaves, its array metadata file, and
  // stops there: no `_METADATA`, no merge, no commit (FinalizeColocatedSave
  // does those on the controller). Zarr metadata is written only by the
  // process named "0" or by a named one (the controller), so no key is in
  // two databases. Requires `caller_commits`.
  bool shards_only = false;
  // Every collective of the save gives up (Unavailable) after this long.
  std::chrono::nanoseconds timeout = std::chrono::minutes(10);
};

// How a save writes one host's own copy in the emergency local tier (Orbax's
// local layout). Only emergency/ sets these; every other save keeps the
// defaults. Apart from SaveOptions so that the generic options hold only
// what every save path means.
struct LocalTierSave {
  // This process writes every shard it holds, whatever its replica id (each
  // distinct box once), instead of the shards save_plan.h assigns to it.
  bool write_all_held_shards = false;
  // >= 0: this process saves alone (a single-process coordinator) as
  // process `own_process_index` of its job: its database and array metadata
  // are named after that index (`ocdbt.process_<i>/`), as every host names
  // its own local checkpoint in Orbax's emergency layout.
  int own_process_index = -1;
  // Values of at least this many bytes start at a multiple of it in their
  // OCDBT data file (OcdbtOptions::value_alignment); the emergency local
  // tier sets the page size, so a restore from a RAM disk can map chunks
  // instead of copying them (kvstore/mapped_read.h). 0: packed.
  uint64_t ocdbt_value_alignment = 0;
};

struct SaveRequest {
  // The final directory. With `item_name` empty it is the item directory (as
  // PyTreeCheckpointer().save(directory) makes it); otherwise a step
  // directory that gets the item `item_name` and `_CHECKPOINT_METADATA`, as
  // CheckpointManager lays it out. AlreadyExists when it exists.
  std::string directory;
  // When set, the store and prefix of `directory` (which then only names it
  // in messages and collectives): saves into any store, e.g. one wrapped by
  // a test. Unset: `directory` is opened as a local path.
  std::optional<orbax::Location> location;
  std::string item_name;
  // The directory is an item directory that another program commits
  // (Orbax's CheckpointManager driving cairn's checkpoint handler): the
  // engine writes the item's files straight into it (it may exist already)
  // and leaves the rest of the commit to that program: no temporary name,
  // no `_CHECKPOINT_METADATA`, no `commit_success.txt`, no rename. Requires
  // an empty `item_name`.
  bool caller_commits = false;
  std::vector<SaveLeaf> leaves;
  SaveOptions options;
  LocalTierSave local_tier;  // the emergency local tier's (above)
  // Small files the primary writes into the top directory before the commit
  // (path relative to it, "a/b.json"; content), so they appear atomically
  // with the checkpoint (the emergency tier's `process_metadata/`).
  std::vector<std::pair<std::string, std::string>> extra_files;
  // Items of the step besides `item_name` (e.g. Orbax JSON items written as
  // extra_files `<name>/metadata`): item name -> the typestr of the Orbax
  // handler that reads them, recorded in `_CHECKPOINT_METADATA`.
  std::map<std::string, std::string> extra_item_handlers;
  // `_CHECKPOINT_METADATA`'s custom_metadata (Orbax's
  // CheckpointManager.save(custom_metadata=)); null: an empty object.
  Json step_custom_metadata;
};

}  // namespace cairn::engine
