// Restore planning: which stored chunks (or shards) a restore reads, and
// which parts of which destination boxes each one fills.
//
// A chunk is read once however many boxes it serves (restoring onto
// another sharding, one process's 8 device boxes all cut the same stored
// chunk). For an array stored with a top-level `sharding_indexed` codec,
// the plan also records which inner chunks are needed: when every inner
// chunk of the shard's in-bounds part is, the shard is read whole; else
// its index first, then only those inner chunks.
//
// Thread safety: pure functions over immutable inputs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cairn/codec/sharding_codec.h"
#include "cairn/engine/restore.h"
#include "cairn/zarr/array.h"

namespace cairn::engine {

// Where one requested box's elements go.
struct Destination {
  Box box;
  uint8_t* data = nullptr;
  std::vector<Index> byte_strides;  // always filled in
  std::shared_ptr<MappedBytes>* mapped = nullptr;  // BoxToRestore::mapped
};

// The part `inter` (global coordinates) of destination `dest` that a chunk
// or an inner chunk fills.
struct PartToFill {
  size_t dest = 0;
  Box inter;
};

// An inner chunk of a shard and the parts it fills.
struct InnerChunkToRead {
  std::vector<Index> cell;  // in the shard's inner grid
  Box box;                  // global coordinates (may stick out of the array)
  std::vector<PartToFill> parts;
};

struct ChunkToRead {
  std::string key;
  Box box;                  // the chunk's (or shard's) box, global
  std::vector<PartToFill> parts;
  // Sharded arrays only: the inner chunks needed, and whether that is all
  // of them (then the shard is read whole).
  std::vector<InnerChunkToRead> inner;
  bool whole_shard = true;
};

struct ArrayRestorePlan {
  std::shared_ptr<ZarrArray> array;
  const ShardingCodec* sharding = nullptr;  // a top-level sharding_indexed codec
  ChunkSpec spec;                           // the chunk's (shard's)
  std::vector<Destination> dests;
  std::vector<ChunkToRead> chunks;
};

// Checks the boxes of `a` against the stored array (rank, bounds: else
// InvalidArgument naming the param and `dir`) and plans its reads.
Result<ArrayRestorePlan> PlanArrayRestore(const ArrayToRestore& a, std::shared_ptr<ZarrArray> array,
                                          const std::string& dir);

}  // namespace cairn::engine
