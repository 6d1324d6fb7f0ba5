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
#include <memory>
#include <string>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

struct CheckpointShard {
  std::vector<int64_t> origin;  // in global coordinates
  std::vector<int64_t> shape;
  const void* data = nullptr;   // C-contiguous, native endian
  int replica_id = 0;
  // The buffer stays valid and unchanged until the save is finished (as a
  // jax.Array's): it is read in the background instead of being copied
  // before StartSave returns.
  bool immutable = false;
};

struct CheckpointArray {
  std::vector<std::string> path;  // keys from the tree's root: {"params", "w"}
  std::string dtype;              // "float32", "bfloat16", "int32", ...
  std::vector<int64_t> shape;
  std::vector<int64_t> write_shape;  // the shard shape; empty: the whole array
  int num_replicas = 1;
  std::vector<CheckpointShard> shards;  // this process's shards
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
};

class CheckpointSave {
 public:
  virtual ~CheckpointSave() = default;
  // Blocks until the checkpoint is committed (or failed on any process).
  virtual Status Wait() = 0;
  virtual bool done() const = 0;
};

Result<std::unique_ptr<CheckpointSave>> StartSaveCheckpoint(
    const std::string& directory, const std::vector<CheckpointArray>& arrays,
    const SaveCheckpointOptions& options, Coordinator& coordinator);

// StartSaveCheckpoint(...) then Wait().
Status SaveCheckpoint(const std::string& directory, const std::vector<CheckpointArray>& arrays,
                      const SaveCheckpointOptions& options, Coordinator& coordinator);

struct RestoreBox {
  std::vector<int64_t> origin;
  std::vector<int64_t> shape;
  void* data = nullptr;  // C-contiguous destination of the box
};

struct RestoreArray {
  std::vector<std::string> path;
  std::string dtype;  // "" to accept the stored dtype; else it must match
  std::vector<RestoreBox> boxes;
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

}  // namespace cairn
