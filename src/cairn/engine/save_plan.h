// SavePlan: which boxes of which arrays this process writes, chunk by chunk.
//
// Chunk shape: Orbax's rule (orbax::ChooseChunkShape) applied to each
// array's write shape, so every process and every mode computes the same
// chunk grid and metadata.
//
// Which shards this process writes:
//   - replica 0 only (replica_parallel off): every shard with replica_id 0,
//     whole;
//   - replica-parallel (as Orbax does it): a shard with num_replicas > 1 is
//     split along its first dimension whose extent divides into
//     num_replicas slices that are each a whole number of chunks; replica r
//     writes slice r. A shard with no such dimension is written whole by
//     replica 0. Either way each chunk is written exactly once, by one
//     process, with the same bytes.
//   - every shard held (LocalTierSave::write_all_held_shards, the emergency
//     local tier): each distinct box this process holds, whole.
// Shards must be aligned to the chunk grid (each edge on a chunk boundary
// or at the array's end): InvalidArgument otherwise, naming leaf and box,
// since two processes would otherwise write parts of one chunk.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "cairn/engine/save_request.h"
#include "cairn/result.h"

namespace cairn::engine {

// A box this process writes, with the host memory it comes from.
struct PlannedPiece {
  Box box;
  const uint8_t* data = nullptr;    // element at box.origin
  std::vector<Index> byte_strides;  // always filled in
  bool immutable = false;           // ShardToSave::immutable
};

struct ArrayPlan {
  size_t leaf = 0;      // index into SaveRequest::leaves
  std::string param;    // Orbax param name ("a.b.0")
  Shape chunk_shape;    // same on every process
  std::vector<PlannedPiece> pieces;
  uint64_t elements() const;  // elements of all pieces
};

struct SavePlan {
  std::vector<ArrayPlan> arrays;  // one per array leaf, in leaf order
  uint64_t bytes = 0;             // bytes this process writes
};

// Checks the leaves (param names unique, ranks, shards inside their array,
// replica ids < num_replicas, chunk-aligned shards) and plans.
Result<SavePlan> PlanSave(const SaveRequest& request);

// The chunk shape of an array leaf under `options` (Orbax's rule).
Shape ChunkShapeFor(const SaveLeaf& leaf, const SaveOptions& options);

}  // namespace cairn::engine
