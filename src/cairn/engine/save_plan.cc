#include "cairn/engine/save_plan.h"

#include <algorithm>

#include "cairn/layout/orbax/item_writer.h"

namespace cairn::engine {
namespace {

bool OnGrid(Index pos, Index chunk, Index extent) { return pos == extent || pos % chunk == 0; }

Status CheckShard(const SaveLeaf& leaf, const ShardToSave& s, const Shape& chunk,
                  const std::string& where) {
  const size_t rank = leaf.shape.size();
  if (s.box.rank() != rank || s.box.origin.size() != rank) {
    return InvalidArgumentError(where + ": shard " + s.box.ToString() + " has rank " +
                                std::to_string(s.box.rank()) + ", the array " + std::to_string(rank));
  }
  if (!s.byte_strides.empty() && s.byte_strides.size() != rank) {
    return InvalidArgumentError(where + ": shard " + s.box.ToString() + " has " +
                                std::to_string(s.byte_strides.size()) + " strides for rank " +
                                std::to_string(rank));
  }
  if (s.replica_id < 0 || s.replica_id >= std::max(leaf.num_replicas, 1)) {
    return InvalidArgumentError(where + ": shard " + s.box.ToString() + " has replica id " +
                                std::to_string(s.replica_id) + " of " + std::to_string(leaf.num_replicas));
  }
  if (s.data == nullptr && !s.box.empty()) {
    return InvalidArgumentError(where + ": shard " + s.box.ToString() + " has no buffer");
  }
  for (size_t d = 0; d < rank; ++d) {
    const Index lo = s.box.origin[d], n = s.box.shape[d];
    if (lo < 0 || n < 0 || lo > leaf.shape[d] - n) {
      return InvalidArgumentError(where + ": shard " + s.box.ToString() + " lies outside shape " +
                                  Box::FromShape(leaf.shape).ToString());
    }
    if (!OnGrid(lo, chunk[d], leaf.shape[d]) || !OnGrid(lo + n, chunk[d], leaf.shape[d])) {
      std::string cs;
      for (Index c : chunk) cs += (cs.empty() ? "" : ",") + std::to_string(c);
      return InvalidArgumentError(where + ": shard " + s.box.ToString() +
                                  " is not aligned with the chunk grid (chunk shape [" + cs +
                                  "]) in dimension " + std::to_string(d));
    }
  }
  return Status::OK();
}

PlannedPiece Piece(const ShardToSave& s, size_t elem) {
  PlannedPiece p;
  p.box = s.box;
  p.data = static_cast<const uint8_t*>(s.data);
  p.byte_strides = s.byte_strides.empty() ? CStrides(s.box.shape, elem) : s.byte_strides;
  p.immutable = s.immutable;
  return p;
}

// The slice of `s` replica `s.replica_id` writes in replica-parallel mode,
// or nullopt when the shard cannot be split (replica 0 writes it whole).
std::optional<PlannedPiece> ReplicaSlice(const SaveLeaf& leaf, const ShardToSave& s,
                                         const Shape& chunk, size_t elem) {
  const Index replicas = leaf.num_replicas;
  for (size_t d = 0; d < s.box.rank(); ++d) {
    const Index n = s.box.shape[d];
    if (n == 0 || n % replicas != 0) continue;
    const Index slice = n / replicas;
    if (slice % chunk[d] != 0) continue;
    PlannedPiece p = Piece(s, elem);
    p.box.origin[d] += slice * s.replica_id;
    p.box.shape[d] = slice;
    p.data += slice * s.replica_id * p.byte_strides[d];
    return p;
  }
  return std::nullopt;
}

}  // namespace

uint64_t ArrayPlan::elements() const {
  uint64_t n = 0;
  for (const PlannedPiece& p : pieces) n += static_cast<uint64_t>(p.box.num_elements());
  return n;
}

Shape ChunkShapeFor(const SaveLeaf& leaf, const SaveOptions& options) {
  if (leaf.shape.empty()) return {};
  const Shape& write = leaf.write_shape.empty() ? leaf.shape : leaf.write_shape;
  uint64_t limit = options.use_ocdbt ? options.target_data_file_size : 0;
  if (options.chunk_byte_size != 0) {
    limit = limit == 0 ? options.chunk_byte_size : std::min(limit, options.chunk_byte_size);
  }
  return orbax::ChooseChunkShape(write, DTypeSize(leaf.dtype), limit);
}

Result<SavePlan> PlanSave(const SaveRequest& request) {
  std::vector<orbax::TreeEntry> entries;
  for (const SaveLeaf& leaf : request.leaves) {
    orbax::TreeEntry e;
    e.path = leaf.path;
    e.value.value_type = leaf.value_type;
    entries.push_back(std::move(e));
  }
  CAIRN_RETURN_IF_ERROR(orbax::CheckParamNames(entries));
  SavePlan plan;
  const SaveOptions& options = request.options;
  for (size_t i = 0; i < request.leaves.size(); ++i) {
    const SaveLeaf& leaf = request.leaves[i];
    if (!orbax::IsArrayValueType(leaf.value_type)) continue;
    ArrayPlan a;
    a.leaf = i;
    a.param = orbax::ParamName(leaf.path);
    const std::string where = "saving leaf `" + a.param + "` of " + request.directory;
    if (!leaf.write_shape.empty() && leaf.write_shape.size() != leaf.shape.size()) {
      return InvalidArgumentError(where + ": write shape rank " + std::to_string(leaf.write_shape.size()) +
                                  " differs from the array's rank " + std::to_string(leaf.shape.size()));
    }
    if (leaf.num_replicas < 1) {
      return InvalidArgumentError(where + ": num_replicas must be at least 1");
    }
    if (leaf.sharding) CAIRN_RETURN_IF_ERROR(orbax::ShardingJson(*leaf.sharding, where).status());
    a.chunk_shape = ChunkShapeFor(leaf, options);
    const size_t elem = DTypeSize(leaf.dtype);
    for (const ShardToSave& s : leaf.shards) {
      CAIRN_RETURN_IF_ERROR(CheckShard(leaf, s, a.chunk_shape, where));
      if (s.box.empty()) continue;
      if (request.local_tier.write_all_held_shards) {
        const bool seen = std::any_of(a.pieces.begin(), a.pieces.end(),
                                      [&](const PlannedPiece& p) { return p.box == s.box; });
        if (!seen) a.pieces.push_back(Piece(s, elem));
        continue;
      }
      if (options.replica_parallel && leaf.num_replicas > 1) {
        if (auto slice = ReplicaSlice(leaf, s, a.chunk_shape, elem)) {
          a.pieces.push_back(std::move(*slice));
          continue;
        }
      }
      if (s.replica_id == 0) a.pieces.push_back(Piece(s, elem));
    }
    plan.bytes += a.elements() * elem;
    plan.arrays.push_back(std::move(a));
  }
  return plan;
}

}  // namespace cairn::engine
