// cairn's save/restore engine, for C++ programs (a trainer, an MPI job, a
// colocated-Python sidecar): every process hands over the shards it holds;
// cairn writes the ones this process owns, straight to storage, and one
// primary process commits an Orbax checkpoint (OCDBT + Zarr v3 by default)
// that orbax-checkpoint and TensorStore read as their own.
//
// Contract:
//   - Every process of the job calls SaveCheckpoint / StartSaveCheckpoint
//     with the same directory, the same arrays (paths, dtypes, shapes, write
//     shapes, replica counts) and options, and its own shards, with the same
//     Coordinator (include/cairn/coordinator.h).
//   - A shard is a box of the global array (origin + shape) and a pointer to
//     its first element, C-contiguous. Shards must be aligned with the
//     array's write shape (the shard shape of its sharding). Replicated
//     shards carry replica ids 0..num_replicas-1; with replica_parallel
//     every replica writes a slice, else replica 0 writes.
//   - StartSaveCheckpoint returns once every shard this process writes is
//     copied into cairn's memory (bounded by memory_budget_bytes): the
//     caller may then reuse its buffers. Wait() returns after the durable
//     commit, with the first error of any process.
//   - A checkpoint is visible only when complete; on any error nothing is
//     committed.
//
// Thread safety: calls for different checkpoints may run concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/interrupt.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

struct CheckpointShard {
  std::vector<int64_t> origin;  // in global coordinates
  std::vector<int64_t> shape;
  const void* data = nullptr;   // the element at `origin`, native endian
  int replica_id = 0;
  // The buffer stays valid and unchanged until the save is finished (as a
  // jax.Array's): it is read in the background instead of being copied
  // before StartSave returns.
  bool immutable = false;
  // Bytes between neighbours along each dimension; empty: C-contiguous.
  std::vector<int64_t> byte_strides{};
  // Bytes per element of `data` as the caller holds it; 0: the dtype's.
  // Another size than the dtype's is InvalidArgument.
  int64_t item_size = 0;
};

// A box of an array: its first element and its extent.
struct ArrayBox {
  std::vector<int64_t> origin;
  std::vector<int64_t> shape;
};

// How a key of CheckpointArray::path indexes its parent (Orbax's key types).
enum class PathKeyKind : int { kSequence = 1, kDict = 2 };

// One entry of a PartitionSpec: unsharded, one mesh axis, or several.
struct PartitionSpecEntry {
  enum class Kind { kNone, kAxis, kAxes };
  Kind kind = Kind::kNone;
  std::vector<std::string> axes;  // kAxis: exactly one; kAxes: any number
};

// A jax sharding's facts, written to the item's `_sharding` file as Orbax
// writes them (so Orbax restores the array onto the same sharding).
struct ShardingFacts {
  enum class Kind { kNamed, kSingleDevice };
  Kind kind = Kind::kNamed;
  // kNamed: the mesh and the partition spec.
  std::vector<int64_t> mesh_shape;
  std::vector<std::string> axis_names;  // one per mesh dimension
  // One per mesh dimension as jax prints them ("AxisType.Auto"); empty: all
  // "AxisType.Auto".
  std::vector<std::string> axis_types;
  std::vector<PartitionSpecEntry> partition_spec;
  std::vector<int64_t> device_ids;  // the mesh's device ids, row-major
  // kSingleDevice: "<platform>:<device id>", e.g. "cpu:0".
  std::string device_str;
};

// Where the write shape and replica count come from when the caller
// describes an array by its sharding (CheckpointArray::layout_from):
// Orbax's rule per value type. jax.Array: the box of the sharding's first
// device, held by as many devices as hold that box; np.ndarray (every
// process holds it whole): split along the first axis the process count
// divides; scalar: []; other leaves: nothing to write.
struct ShardingLayout {
  std::vector<ArrayBox> device_boxes;  // every device's box, in device order (jax.Array only)
  int process_count = 1;               // of the job (>= 1)
};

// One leaf of the saved tree. Arrays carry a dtype, a shape and this
// process's shards; strings, None and empty containers only their path,
// value type and (strings) value.
struct CheckpointArray {
  std::vector<std::string> path;  // keys from the tree's root: {"params", "w"}
  // "float32", "bfloat16", "int32", ...; required for array value types.
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> write_shape;  // the shard shape; empty: the whole array
  int num_replicas = 1;
  std::vector<CheckpointShard> shards;  // this process's shards
  // One per key of `path`; empty: every key a dict key. A kind other than
  // the two is InvalidArgument ("key_type must be 1 or 2").
  std::vector<PathKeyKind> key_kinds{};
  // Orbax's value type: "jax.Array", "np.ndarray", "scalar", "string",
  // "None", or an empty container's ("dict", "list", ...).
  std::string value_type = "jax.Array";
  // Set: write_shape and num_replicas are derived from it (ShardingLayout);
  // InvalidArgument naming the leaf for a jax.Array without device boxes,
  // boxes of another rank, or a process count below 1.
  std::optional<ShardingLayout> layout_from{};
  std::optional<std::string> random_key_impl{};  // a jax PRNG key array's implementation
  std::optional<ShardingFacts> sharding{};       // for `_sharding`; unset: none written
  std::string string_value{};                    // value type "string": the string
};

// How a checkpoint is stored; every save path (SaveCheckpoint, both
// managers) takes these, each field meaning the same everywhere.
struct SaveCheckpointOptions {
  bool use_ocdbt = true;  // one OCDBT database per process; else a file per chunk
  bool use_zarr3 = true;  // Zarr v3 arrays (sharded); else Zarr v2
  // Replicated shards are split among their replicas, each writing a slice;
  // off: replica 0 writes each shard whole. The checkpoint is the same.
  bool replica_parallel = true;
  // "default" or "zstd" (Orbax's zstd), "none", or "auto" (zstd only where
  // a sample shrinks by about 10% or more).
  std::string compression = "default";
  uint64_t memory_budget_bytes = 0;  // 0: the process-wide default budget
  // OCDBT data files are started anew past this size, and larger chunks
  // are split (Orbax's rule); 0: unlimited.
  uint64_t target_data_file_size = uint64_t{1} << 31;
  // Upper bound on a chunk's bytes (Orbax's chunk_byte_size); 0: none.
  uint64_t chunk_byte_size = 0;
  // Every collective of the save gives up (Unavailable) after this long.
  std::chrono::nanoseconds timeout = std::chrono::minutes(10);
  // The item's `_METADATA` custom_metadata, as JSON text; "null": none.
  // Text that is not JSON is InvalidArgument naming custom_metadata.
  std::string custom_metadata_json = "null";
  // Called now and then (about every 1%) and once at the end with the bytes
  // of this process's array data written so far and in all, from the
  // save's threads, one call at a time; may be empty.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
  // When requested, the save stops at its next chunk and fails with
  // kCancelled before its commit, leaving nothing (interrupt.h). Must
  // outlive the save. May be null.
  const Interrupt* interrupt = nullptr;
};

// What one StartSaveCheckpoint writes into `directory` and who commits it;
// the defaults: `directory` is the item directory and cairn commits it.
struct SaveCheckpointTarget {
  // Non-empty: `directory` is a step directory that gets this item and
  // `_CHECKPOINT_METADATA` (as Orbax's CheckpointManager lays a step out).
  std::string item_name;
  // `directory` is an item directory another program commits (Orbax's
  // CheckpointManager driving cairn's handler): the files go straight into
  // it and nothing is renamed. Requires an empty item_name.
  bool caller_commits = false;
  // Pathways colocated Python: this process writes its chunks and array
  // metadata and stops there (FinalizeColocatedSave does the rest).
  // Requires caller_commits.
  bool shards_only = false;
  // Non-empty: this process's database and array metadata file are named
  // after it (`ocdbt.process_<name>/`) instead of its index.
  std::string process_name;
};

class CheckpointSave {
 public:
  virtual ~CheckpointSave() = default;
  // Blocks until the checkpoint is committed (or failed on any process).
  // Errors: the save's first error on any process (as StartSaveCheckpoint's).
  virtual Status Wait() = 0;
  // Result: whether Wait would return at once.
  virtual bool done() const = 0;
  // Result: the checkpoint's final directory.
  virtual const std::string& directory() const = 0;
};

// Result: the save, once this process's shards are copied (or, immutable
// ones, left to be read in the background). Errors: InvalidArgument for
// arrays that do not fit their shapes, an unknown dtype or bad options
// (naming the leaf or option); AlreadyExists when `directory` exists;
// the store's errors naming the key; Unavailable when the other processes
// do not arrive within the timeout.
Result<std::unique_ptr<CheckpointSave>> StartSaveCheckpoint(
    const std::string& directory, const std::vector<CheckpointArray>& arrays,
    const SaveCheckpointOptions& options, Coordinator& coordinator,
    const SaveCheckpointTarget& target = {});

// StartSaveCheckpoint(...) then Wait(). Errors: theirs.
Status SaveCheckpoint(const std::string& directory, const std::vector<CheckpointArray>& arrays,
                      const SaveCheckpointOptions& options, Coordinator& coordinator);

// The last step of a Pathways colocated save, on the controller once every
// host's shards-only save returned: `arrays` is the whole tree (shards
// ignored), `directory` the item directory the caller commits;
// `process_names` names the processes that wrote ({"0", "1",
// "pwcontroller"}). Of `options` only use_ocdbt, use_zarr3 and
// custom_metadata_json matter. Errors: an error naming the file when a
// host lacks its array metadata or two hosts disagree; InvalidArgument as
// StartSaveCheckpoint's; the store's errors.
Status FinalizeColocatedSave(const std::string& directory, const std::vector<CheckpointArray>& arrays,
                             const SaveCheckpointOptions& options,
                             const std::vector<std::string>& process_names);

struct RestoreBox {
  std::vector<int64_t> origin;
  std::vector<int64_t> shape;
  void* data = nullptr;  // destination of the box's element at `origin`
  // Bytes between neighbours along each dimension; empty: C-contiguous.
  std::vector<int64_t> byte_strides{};
};

struct RestoreArray {
  std::vector<std::string> path;
  std::string dtype;  // "" to accept the stored dtype; else it must match
  std::vector<RestoreBox> boxes;
  // Non-empty: the Orbax param name ("params.w") instead of `path`.
  std::string param{};
  // The boxes the other processes of the same restore read (any order;
  // empty alone): chunks they share with this process are read through the
  // page cache, which processes on one host share.
  std::vector<ArrayBox> boxes_of_other_processes{};
};

class CheckpointItem;  // orbax.h

// What a restore did with its chunks.
struct RestoreStats {
  int64_t chunks_read = 0;              // read and decoded by this process for itself only
  int64_t host_share_rounds = 0;        // rounds of the host's shared decoding window
  int64_t chunks_decoded_for_host = 0;  // decoded by this process into the host's shared file
  int64_t chunks_from_host = 0;         // copied out of another process's decoding
  int64_t chunks_fallen_back = 0;       // another process's that failed: decoded here
};

struct RestoreOptions {
  // Of a step directory: the item to read ("": `default`, else its only one).
  std::string item_name;
  // The item, already opened (OpenCheckpointItem): read instead of opening
  // the directory again (which then only names it in messages).
  std::shared_ptr<const CheckpointItem> item;
  // The processes restoring together (each with its own boxes): those of
  // one host decode each compressed chunk two or more need once, through a
  // shared-memory file (/dev/shm). Null: this process restores alone.
  Coordinator* coordinator = nullptr;
  // Called now and then (about every 1%) and once at the end with the bytes
  // of the requested boxes filled so far and in all, from the restore's
  // threads, one call at a time; may be empty.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
  // When requested, the restore stops at its next chunk with kCancelled
  // (the boxes are then partly filled). May be null.
  const Interrupt* interrupt = nullptr;
};

// Reads the requested boxes of an Orbax checkpoint (item directory, step
// or root: its latest step), each from only the chunks it intersects.
// Boxes may be any part of an array, on any process: restoring onto
// another sharding needs nothing more.
Status RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays);

// The same, by every process of a job together (each with its own boxes):
// the processes of one host then decode each compressed chunk that two or
// more of them need once, and copy their parts out of a shared-memory file
// (/dev/shm). Every process of `coordinator` must call it.
Status RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays,
                         Coordinator* coordinator);

// The same with every option. Result: what the restore did with its chunks.
// Errors: NotFound for a missing item or array; InvalidArgument for a box
// outside its array, a dtype mismatch or an unknown dtype name; DataLoss
// for a corrupt chunk; each naming the array and the item directory;
// Unavailable when the other processes do not arrive.
Result<RestoreStats> RestoreCheckpoint(const std::string& directory, const std::vector<RestoreArray>& arrays,
                                       const RestoreOptions& options);

}  // namespace cairn
