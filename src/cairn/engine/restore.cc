// Implements Restore (restore.h) in three steps:
//   1. Open the item; an OCDBT item's database is pinned to its latest
//      generation (the manifest is read once for the whole restore, B+tree
//      nodes are decoded once) and every array's metadata is read.
//   2. Plan (restore_plan.h): the chunks every box touches, each once.
//   3. Tell the store whether other processes read the same chunks
//      (KvStore::SetReadsShared: then through the page cache they share,
//      else large cold reads bypass it).
//   4. Map the chunks whose boxes allow it (BoxToRestore::mapped; the store
//      decides whether it can: kvstore/mapped_read.h), in parallel; those
//      chunks are not read.
//   5. Read with KvStore::GetMany, all arrays' chunks in one batch split
//      into a few slices that run in parallel: whole chunks (and shards
//      wholly needed) first, with the index of each shard needed only in
//      part; then those shards' inner chunks. Each value is decoded as it
//      arrives, on the thread that read it: straight into the destination
//      where the chunk fills one C-contiguous part of it (zstd decompresses
//      there), else into a buffer whose parts are copied out; where no
//      codec changes the bytes they are copied straight from the read
//      buffer. Missing chunks fill with the fill
//      value without being built.
#include "cairn/engine/restore.h"

#include <algorithm>
#include <memory>

#include "cairn/engine/restore_plan.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/util/thread_pool.h"
#include "cairn/zarr/shard_io.h"

namespace cairn::engine {
namespace {

using internal_zarr::FillStrided;
using internal_zarr::Offset;

using ValueFn = std::function<Status(size_t index, std::optional<ByteView> value)>;

size_t Linear(const std::vector<Index>& cell, const Shape& grid) {
  size_t n = 0;
  for (size_t d = 0; d < cell.size(); ++d) n = n * static_cast<size_t>(grid[d]) + static_cast<size_t>(cell[d]);
  return n;
}

// Copies each part from `src` (a C-order block covering `src_box`), or
// fills it with the fill value when `src` is null.
void FillParts(const ArrayRestorePlan& p, const std::vector<PartToFill>& parts, const uint8_t* src,
               const Box& src_box) {
  const size_t elem = DTypeSize(p.spec.dtype);
  const std::vector<Index> src_strides = CStrides(src_box.shape, elem);
  for (const PartToFill& part : parts) {
    const Destination& d = p.dests[part.dest];
    uint8_t* out = Offset(d.data, part.inter.origin, d.box.origin, d.byte_strides);
    if (src == nullptr) {
      FillStrided(out, d.byte_strides, part.inter.shape, p.spec.fill_value);
      continue;
    }
    const uint8_t* in = Offset(const_cast<uint8_t*>(src), part.inter.origin, src_box.origin, src_strides);
    StridedCopy(in, src_strides, out, d.byte_strides, part.inter.shape, elem);
  }
}

// Where a chunk of `box` can be decoded straight into its destination: when
// `parts` is one part covering the whole chunk and the destination holds that
// box C-contiguously. Empty otherwise.
MutableByteView WholeChunkDestination(const ArrayRestorePlan& p, const std::vector<PartToFill>& parts,
                                      const Box& box) {
  if (parts.size() != 1 || parts[0].inter.origin != box.origin || parts[0].inter.shape != box.shape) {
    return {};
  }
  const Destination& d = p.dests[parts[0].dest];
  const size_t elem = DTypeSize(p.spec.dtype);
  const std::vector<Index> c = CStrides(box.shape, elem);
  for (size_t i = 0; i < box.rank(); ++i) {
    if (box.shape[i] > 1 && d.byte_strides[i] != c[i]) return {};
  }
  uint8_t* out = Offset(d.data, box.origin, d.box.origin, d.byte_strides);
  return MutableByteView(out, static_cast<size_t>(box.num_elements()) * elem);
}

// Decodes a (inner) chunk of `spec` (its box `box`) into the parts it fills:
// straight into the destination where WholeChunkDestination allows, else
// through a chunk-sized buffer (none where the chain is the identity).
Status DecodeIntoParts(const ArrayRestorePlan& p, const CodecChain& chain, const ChunkSpec& spec,
                       ByteView stored, const std::vector<PartToFill>& parts, const Box& box) {
  const size_t n = spec.num_bytes();
  if (MutableByteView out = WholeChunkDestination(p, parts, box); out.size() == n && n != 0) {
    return chain.DecodeInto(spec, stored, out);
  }
  if (chain.IsIdentity(spec)) {
    if (stored.size() != n) {
      return DataLossError("chunk has " + std::to_string(stored.size()) + " bytes, expected " +
                           std::to_string(n));
    }
    FillParts(p, parts, stored.data(), box);
    return Status::OK();
  }
  CAIRN_ASSIGN_OR_RETURN(Buffer decoded, chain.Decode(spec, stored));
  if (decoded.size() != n) {
    return DataLossError("chunk decoded to " + std::to_string(decoded.size()) + " bytes, expected " +
                         std::to_string(n));
  }
  FillParts(p, parts, decoded.data(), box);
  return Status::OK();
}

Status DeliverInner(const ArrayRestorePlan& p, const InnerChunkToRead& ic, std::optional<ByteView> bytes) {
  if (!bytes) {
    FillParts(p, ic.parts, nullptr, ic.box);
    return Status::OK();
  }
  return DecodeIntoParts(p, p.sharding->inner_codecs(), p.sharding->InnerSpec(p.spec), *bytes, ic.parts,
                         ic.box)
      .Annotate("inner chunk " + ic.box.ToString());
}

Status DeliverChunk(const ArrayRestorePlan& p, const ChunkToRead& c, std::optional<ByteView> value) {
  if (!value) {
    FillParts(p, c.parts, nullptr, c.box);
    return Status::OK();
  }
  if (p.sharding == nullptr) return DecodeIntoParts(p, p.array->metadata().codecs, p.spec, *value, c.parts, c.box);
  CAIRN_ASSIGN_OR_RETURN(ByteView index_bytes, p.sharding->IndexBytes(p.spec, *value));
  CAIRN_ASSIGN_OR_RETURN(auto entries, p.sharding->DecodeIndex(p.spec, index_bytes));
  CAIRN_RETURN_IF_ERROR(ValidateShardIndex(entries, value->size()));
  const Shape grid = p.sharding->GridShape(p.spec);
  for (const InnerChunkToRead& ic : c.inner) {
    const ShardIndexEntry& e = entries[Linear(ic.cell, grid)];
    std::optional<ByteView> bytes;
    if (!e.missing()) bytes = value->subspan(e.offset, e.nbytes);
    CAIRN_RETURN_IF_ERROR(DeliverInner(p, ic, bytes));
  }
  return Status::OK();
}

// Where chunk `c` may be mapped instead of read: its one part is its whole
// box, which is a whole destination asking for a mapping, held
// C-contiguously, and the chunk's elements are stored as they are in
// memory at the start of its value: an identity codec chain, or (Orbax's
// zarr3) a sharding codec whose shard is one inner chunk with identity
// codecs and the index at the end. nullptr otherwise.
std::shared_ptr<MappedBytes>* MappableDestination(const ArrayRestorePlan& p, const ChunkToRead& c) {
  if (c.parts.size() != 1) return nullptr;
  const Destination& d = p.dests[c.parts[0].dest];
  if (d.mapped == nullptr || d.box != c.box || c.parts[0].inter != c.box) return nullptr;
  if (WholeChunkDestination(p, c.parts, c.box).data() != d.data) return nullptr;
  if (p.sharding == nullptr) return p.array->metadata().codecs.IsIdentity(p.spec) ? d.mapped : nullptr;
  const Shape grid = p.sharding->GridShape(p.spec);
  if (!c.whole_shard || p.sharding->index_location() != ShardIndexLocation::kEnd ||
      std::any_of(grid.begin(), grid.end(), [](Index g) { return g != 1; }) ||
      !p.sharding->inner_codecs().IsIdentity(p.sharding->InnerSpec(p.spec))) {
    return nullptr;
  }
  return d.mapped;
}

// Maps the elements of chunk `c` (MappableDestination allowed it), or
// nullptr when the store cannot or the stored value is not laid out as
// expected (the read then reports what is wrong).
std::shared_ptr<MappedBytes> MapChunk(MappedReadStore& maps, const ArrayRestorePlan& p, const ChunkToRead& c) {
  const uint64_t n = p.spec.num_bytes();
  const uint64_t index = p.sharding == nullptr ? 0 : p.sharding->EncodedIndexSize(p.spec);
  auto m = maps.MapRange(c.key, 0, n + index);
  if (!m.ok() || *m == nullptr || (*m)->value_size() != n + index) return nullptr;
  if (p.sharding != nullptr) {
    const ByteView shard((*m)->data(), (*m)->size());
    auto index_bytes = p.sharding->IndexBytes(p.spec, shard);
    if (!index_bytes.ok()) return nullptr;
    auto entries = p.sharding->DecodeIndex(p.spec, *index_bytes);
    if (!entries.ok() || entries->size() != 1 || !ValidateShardIndex(*entries, shard.size()).ok() ||
        (*entries)[0].offset != 0 || (*entries)[0].nbytes != n) {
      return nullptr;
    }
    (*m)->Shrink(static_cast<size_t>(n));
  }
  return std::move(*m);
}

// Step 4: maps what MappableDestination allows; returns, per chunk of each
// plan, whether it was mapped. A chunk the store cannot map (or fails to:
// the read reports real errors) is read instead.
std::vector<std::vector<bool>> MapChunks(std::vector<ArrayRestorePlan>& plans, KvStore& store) {
  std::vector<std::vector<bool>> mapped(plans.size());
  MappedReadStore* maps = AsMappedReadStore(&store);
  struct Candidate {
    size_t array;
    size_t chunk;
    std::shared_ptr<MappedBytes>* out;
  };
  std::vector<Candidate> candidates;
  for (size_t a = 0; a < plans.size(); ++a) {
    mapped[a].assign(plans[a].chunks.size(), false);
    if (maps == nullptr) continue;
    for (size_t c = 0; c < plans[a].chunks.size(); ++c) {
      if (auto* out = MappableDestination(plans[a], plans[a].chunks[c])) candidates.push_back({a, c, out});
    }
  }
  if (candidates.empty()) return mapped;
  std::vector<std::shared_ptr<MappedBytes>> got(candidates.size());
  TaskGroup group;
  for (size_t i = 0; i < candidates.size(); ++i) {
    group.Run([&, i]() -> Status {
      const Candidate& k = candidates[i];
      got[i] = MapChunk(*maps, plans[k.array], plans[k.array].chunks[k.chunk]);
      return Status::OK();
    });
  }
  group.Wait().IgnoreError();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (got[i] == nullptr) continue;
    *candidates[i].out = std::move(got[i]);
    mapped[candidates[i].array][candidates[i].chunk] = true;
  }
  return mapped;
}

// GetMany over a few contiguous slices of `reads` at once (parallelism for
// drivers whose GetMany reads one value at a time).
Status ReadSliced(KvStore& store, const std::vector<KeyRead>& reads, const ValueFn& fn) {
  ThreadPool& pool = ThreadPool::Default();
  const size_t slices = std::min(reads.size(), pool.size());
  if (slices <= 1) return store.GetMany(reads, fn);
  TaskGroup group(pool);
  const size_t per = (reads.size() + slices - 1) / slices;
  for (size_t b = 0; b < reads.size(); b += per) {
    group.Run([&, b]() -> Status {
      const size_t e = std::min(reads.size(), b + per);
      std::vector<KeyRead> slice(reads.begin() + static_cast<std::ptrdiff_t>(b),
                                 reads.begin() + static_cast<std::ptrdiff_t>(e));
      return store.GetMany(slice, [&](size_t i, std::optional<ByteView> v) { return fn(b + i, v); });
    });
  }
  return group.Wait();
}

// Whether another process reads a chunk this process reads (its boxes
// touch one of this plan's chunks).
bool ReadsOverlapOtherProcesses(const ArrayToRestore& a, const ArrayRestorePlan& p) {
  for (const Box& other : a.boxes_of_other_processes) {
    if (other.rank() != p.spec.shape.size()) continue;
    for (const ChunkToRead& c : p.chunks) {
      if (Intersect(c.box, other).num_elements() > 0) return true;
    }
  }
  return false;
}

// A ranged read that does not fit its value means the shard's bytes are
// inconsistent with its index.
Status AsDataLoss(Status s, const std::string& what) {
  if (s.code() != StatusCode::kInvalidArgument) return s;
  return DataLossError(what + ": " + std::string(s.message()));
}

}  // namespace

Status Restore(const RestoreRequest& request) {
  // Step 1.
  CAIRN_ASSIGN_OR_RETURN(orbax::Location where, orbax::OpenLocation(request.directory));
  CAIRN_ASSIGN_OR_RETURN(orbax::Location item_location,
                         orbax::ResolveItemLocation(where, request.item_name));
  CAIRN_ASSIGN_OR_RETURN(orbax::OrbaxItem item, orbax::OpenItem(item_location));
  if (auto* db = dynamic_cast<ocdbt::OcdbtKvStore*>(item.store.get())) {
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ocdbt::OcdbtKvStore> pinned, db->PinLatest());
    item.store = std::move(pinned);
  }
  const std::string dir = item_location.Path();
  std::vector<ArrayRestorePlan> plans(request.arrays.size());
  {
    TaskGroup group;
    for (size_t i = 0; i < request.arrays.size(); ++i) {
      group.Run([&, i]() -> Status {
        const ArrayToRestore& a = request.arrays[i];
        CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZarrArray> array, orbax::OpenItemArray(item, a.param));
        if (a.dtype && *a.dtype != array->dtype()) {
          return InvalidArgumentError("restoring `" + a.param + "` of " + dir + ": stored dtype " +
                                      std::string(DTypeName(array->dtype())) + ", requested " +
                                      std::string(DTypeName(*a.dtype)));
        }
        // Step 2.
        CAIRN_ASSIGN_OR_RETURN(plans[i], PlanArrayRestore(a, std::move(array), dir));
        return Status::OK();
      });
    }
    CAIRN_RETURN_IF_ERROR(group.Wait());
  }
  KvStore& store = *item.store;
  // Step 3.
  bool shared = false;
  for (size_t a = 0; a < plans.size() && !shared; ++a) {
    shared = ReadsOverlapOtherProcesses(request.arrays[a], plans[a]);
  }
  store.SetReadsShared(shared);
  auto where_of = [&](size_t a, const std::string& key) {
    return "restoring `" + request.arrays[a].param + "` of " + dir + ": reading " + store.Describe(key);
  };

  // Step 4.
  const std::vector<std::vector<bool>> mapped = MapChunks(plans, store);

  // Step 5: whole chunks, and the indexes of shards needed in part.
  struct Target {
    size_t array;
    size_t chunk;
  };
  std::vector<KeyRead> reads;
  std::vector<Target> targets;
  for (size_t a = 0; a < plans.size(); ++a) {
    const ArrayRestorePlan& p = plans[a];
    for (size_t c = 0; c < p.chunks.size(); ++c) {
      if (mapped[a][c]) continue;
      const ChunkToRead& chunk = p.chunks[c];
      ByteRange range;
      if (p.sharding != nullptr && !chunk.whole_shard) {
        const uint64_t n = p.sharding->EncodedIndexSize(p.spec);
        range = p.sharding->index_location() == ShardIndexLocation::kEnd ? ByteRange::Suffix(n)
                                                                         : ByteRange::Range(0, n);
      }
      reads.push_back({chunk.key, range});
      targets.push_back({a, c});
    }
  }
  // Per partly needed shard, its index (empty until read; missing shard: none).
  std::vector<std::optional<std::vector<ShardIndexEntry>>> indexes(reads.size());
  Status first = ReadSliced(store, reads, [&](size_t i, std::optional<ByteView> value) -> Status {
    const ArrayRestorePlan& p = plans[targets[i].array];
    const ChunkToRead& c = p.chunks[targets[i].chunk];
    if (p.sharding == nullptr || c.whole_shard) {
      return DeliverChunk(p, c, value).Annotate(where_of(targets[i].array, c.key));
    }
    if (!value) {
      FillParts(p, c.parts, nullptr, c.box);
      return Status::OK();
    }
    auto entries = p.sharding->DecodeIndex(p.spec, *value);
    if (!entries.ok()) return entries.status().Annotate(where_of(targets[i].array, c.key));
    indexes[i] = std::move(*entries);
    return Status::OK();
  });
  CAIRN_RETURN_IF_ERROR(AsDataLoss(first, "restoring from " + dir + ": a shard is shorter than its index"));

  // Then the inner chunks those indexes name.
  struct InnerTarget {
    size_t array;
    size_t chunk;
    size_t inner;
  };
  std::vector<KeyRead> inner_reads;
  std::vector<InnerTarget> inner_targets;
  for (size_t i = 0; i < reads.size(); ++i) {
    if (!indexes[i]) continue;
    const ArrayRestorePlan& p = plans[targets[i].array];
    const ChunkToRead& c = p.chunks[targets[i].chunk];
    const Shape grid = p.sharding->GridShape(p.spec);
    for (size_t k = 0; k < c.inner.size(); ++k) {
      const ShardIndexEntry& e = (*indexes[i])[Linear(c.inner[k].cell, grid)];
      if (e.missing()) {
        FillParts(p, c.inner[k].parts, nullptr, c.inner[k].box);
        continue;
      }
      inner_reads.push_back({c.key, ByteRange::Range(e.offset, e.nbytes)});
      inner_targets.push_back({targets[i].array, targets[i].chunk, k});
    }
  }
  Status second = ReadSliced(store, inner_reads, [&](size_t i, std::optional<ByteView> value) -> Status {
    const InnerTarget& t = inner_targets[i];
    const ArrayRestorePlan& p = plans[t.array];
    const ChunkToRead& c = p.chunks[t.chunk];
    if (!value) return DataLossError(where_of(t.array, c.key) + ": the shard vanished while reading it");
    return DeliverInner(p, c.inner[t.inner], value).Annotate(where_of(t.array, c.key));
  });
  return AsDataLoss(second, "restoring from " + dir + ": a shard index entry points past the shard's end");
}

}  // namespace cairn::engine
