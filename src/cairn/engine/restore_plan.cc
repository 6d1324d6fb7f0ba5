#include "cairn/engine/restore_plan.h"

#include "cairn/zarr/shard_io.h"

namespace cairn::engine {
namespace {

using internal_zarr::CellRange;
using internal_zarr::NextCell;

Box CellBox(const std::vector<Index>& cell, const Shape& chunk_shape, const std::vector<Index>& origin) {
  Box b;
  for (size_t d = 0; d < cell.size(); ++d) {
    b.origin.push_back(origin[d] + cell[d] * chunk_shape[d]);
    b.shape.push_back(chunk_shape[d]);
  }
  return b;
}

// Plans the inner chunks of a shard: every part split by the inner grid.
void PlanInner(ChunkToRead& c, const ShardingCodec& sharding, const ChunkSpec& spec, const Box& valid) {
  const ChunkSpec inner = sharding.InnerSpec(spec);
  std::map<std::vector<Index>, size_t> index;
  for (const PartToFill& p : c.parts) {
    Box rel = p.inter;
    for (size_t d = 0; d < rel.rank(); ++d) rel.origin[d] -= c.box.origin[d];
    std::vector<Index> lo, hi;
    CellRange(rel, inner.shape, lo, hi);
    std::vector<Index> cell = lo;
    do {
      auto [it, added] = index.emplace(cell, c.inner.size());
      if (added) c.inner.push_back({cell, CellBox(cell, inner.shape, c.box.origin), {}});
      InnerChunkToRead& ic = c.inner[it->second];
      ic.parts.push_back({p.dest, Intersect(ic.box, p.inter)});
    } while (NextCell(cell, lo, hi));
  }
  // Whole when every inner chunk of the in-bounds part is needed.
  Box valid_rel = valid;
  for (size_t d = 0; d < valid_rel.rank(); ++d) valid_rel.origin[d] -= c.box.origin[d];
  std::vector<Index> lo, hi;
  CellRange(valid_rel, inner.shape, lo, hi);
  uint64_t in_bounds = 1;
  for (size_t d = 0; d < lo.size(); ++d) in_bounds *= static_cast<uint64_t>(hi[d] - lo[d] + 1);
  c.whole_shard = c.inner.size() == in_bounds;
}

}  // namespace

Result<ArrayRestorePlan> PlanArrayRestore(const ArrayToRestore& a, std::shared_ptr<ZarrArray> array,
                                          const std::string& dir) {
  ArrayRestorePlan plan;
  const ArrayMetadata& m = array->metadata();
  plan.spec = m.chunk_spec();
  plan.sharding = internal_zarr::TopLevelSharding(m.codecs);
  const size_t elem = DTypeSize(m.dtype);
  const Box domain = Box::FromShape(m.shape);
  for (const BoxToRestore& b : a.boxes) {
    bool ok = b.box.rank() == m.shape.size() && b.box.origin.size() == m.shape.size();
    for (size_t d = 0; ok && d < m.shape.size(); ++d) {
      ok = b.box.origin[d] >= 0 && b.box.shape[d] >= 0 && b.box.origin[d] <= m.shape[d] - b.box.shape[d];
    }
    if (!ok) {
      return InvalidArgumentError("restoring `" + a.param + "` of " + dir + ": box " + b.box.ToString() +
                                  " is not within the array's domain " + domain.ToString());
    }
    if (!b.byte_strides.empty() && b.byte_strides.size() != m.shape.size()) {
      return InvalidArgumentError("restoring `" + a.param + "` of " + dir + ": " +
                                  std::to_string(b.byte_strides.size()) + " strides for a rank-" +
                                  std::to_string(m.shape.size()) + " box");
    }
    plan.dests.push_back({b.box, static_cast<uint8_t*>(b.data),
                          b.byte_strides.empty() ? CStrides(b.box.shape, elem) : b.byte_strides, b.mapped});
  }
  std::map<std::vector<Index>, size_t> by_cell;
  const std::vector<Index> zero(m.shape.size(), 0);
  for (size_t di = 0; di < plan.dests.size(); ++di) {
    const Box& box = plan.dests[di].box;
    if (box.empty()) continue;
    std::vector<Index> lo, hi;
    CellRange(box, m.chunk_shape, lo, hi);
    std::vector<Index> cell = lo;
    do {
      auto [it, added] = by_cell.emplace(cell, plan.chunks.size());
      if (added) {
        ChunkToRead c;
        c.key = array->prefix() + array->ChunkKey(cell);
        c.box = CellBox(cell, m.chunk_shape, zero);
        plan.chunks.push_back(std::move(c));
      }
      ChunkToRead& c = plan.chunks[it->second];
      c.parts.push_back({di, Intersect(c.box, box)});
    } while (NextCell(cell, lo, hi));
  }
  if (plan.sharding != nullptr) {
    for (ChunkToRead& c : plan.chunks) PlanInner(c, *plan.sharding, plan.spec, Intersect(c.box, domain));
  }
  plan.array = std::move(array);
  return plan;
}

}  // namespace cairn::engine
