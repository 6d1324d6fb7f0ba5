// Implements Restore (restore.h) in these steps:
//   1. Open the item (or take the one the caller opened); an OCDBT item's
//      database is pinned to its latest generation (the manifest is read
//      once for the whole restore, B+tree nodes are decoded once) and every
//      array's metadata is read.
//   2. Plan (restore_plan.h): the chunks every box touches, each once.
//   3. Tell the store whether other processes read the same chunks
//      (KvStore::SetReadsShared: then through the page cache they share,
//      else large cold reads bypass it). Chunks the host decodes once (see
//      below) are read once: they do not count. Done after step 4 and the
//      host's agreement.
//   4. Map the chunks whose boxes allow it (BoxToRestore::mapped; the store
//      decides whether it can: kvstore/mapped_read.h), in parallel; those
//      chunks are not read. A mapped chunk's CRC-32C (the `crc32c` codec)
//      is checked before it is handed out; one that differs is read
//      instead, and the read reports the mismatch.
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
//   With a coordinator of several processes, the processes of one host
//   decode the compressed chunks two or more of them need once
//   (restore_host_share.h): after step 4 they agree who decodes which
//   (its steps 2-4); in step 5 a process decodes the chunks it owns into
//   the host's shared file and skips those others own; then (its steps
//   6-7) it copies its parts of those out of the file, or reads and decodes
//   them itself where their owner failed. A process that fails before step
//   5 still takes part in the collectives, so that none waits for it.
#include "cairn/engine/restore.h"

#include <algorithm>
#include <memory>

#include "cairn/engine/progress.h"
#include "cairn/engine/restore_decode.h"
#include "cairn/engine/restore_host_share.h"
#include "cairn/engine/restore_plan.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/util/thread_pool.h"
#include "cairn/zarr/shard_io.h"

namespace cairn::engine {
namespace {

using ValueFn = std::function<Status(size_t index, std::optional<ByteView> value)>;

// Where chunk `c` may be mapped instead of read: its one part is its whole
// box, which is a whole destination asking for a mapping, held
// C-contiguously, and the chunk's elements are stored as they are in
// memory at the start of its value, followed at most by their CRC-32C: an
// identity codec chain or `bytes` + `crc32c` (CodecChain::
// ChecksummedIdentityTrailer), or (Orbax's zarr3) a sharding codec whose
// shard is one inner chunk with such codecs and the index at the end.
// nullptr otherwise.
std::shared_ptr<MappedBytes>* MappableDestination(const ArrayRestorePlan& p, const ChunkToRead& c) {
  std::shared_ptr<MappedBytes>* slot = WholeChunkMappedSlot(p, c);
  if (slot == nullptr) return nullptr;
  if (p.sharding == nullptr) {
    return p.array->metadata().codecs.ChecksummedIdentityTrailer(p.spec) ? slot : nullptr;
  }
  const Shape grid = p.sharding->GridShape(p.spec);
  if (!c.whole_shard || p.sharding->index_location() != ShardIndexLocation::kEnd ||
      std::any_of(grid.begin(), grid.end(), [](Index g) { return g != 1; }) ||
      !p.sharding->inner_codecs().ChecksummedIdentityTrailer(p.sharding->InnerSpec(p.spec))) {
    return nullptr;
  }
  return slot;
}

// Maps the elements of chunk `c` (MappableDestination allowed it) once
// their checksum matched, or nullptr when the store cannot map them, the
// stored value is not laid out as expected or its checksum differs: the
// read then reports what is wrong, naming the array and the key.
std::shared_ptr<MappedBytes> MapChunk(MappedReadStore& maps, const ArrayRestorePlan& p, const ChunkToRead& c) {
  const uint64_t n = p.spec.num_bytes();
  const CodecChain& codecs =
      p.sharding == nullptr ? p.array->metadata().codecs : p.sharding->inner_codecs();
  const ChunkSpec spec = p.sharding == nullptr ? p.spec : p.sharding->InnerSpec(p.spec);
  const uint64_t stored = n + codecs.ChecksummedIdentityTrailer(spec).value_or(0);
  const uint64_t index = p.sharding == nullptr ? 0 : p.sharding->EncodedIndexSize(p.spec);
  auto m = maps.MapRange(c.key, 0, stored + index);
  if (!m.ok() || *m == nullptr || (*m)->value_size() != stored + index) return nullptr;
  if (p.sharding != nullptr) {
    const ByteView shard((*m)->data(), (*m)->size());
    auto index_bytes = p.sharding->IndexBytes(p.spec, shard);
    if (!index_bytes.ok()) return nullptr;
    auto entries = p.sharding->DecodeIndex(p.spec, *index_bytes);
    if (!entries.ok() || entries->size() != 1 || !ValidateShardIndex(*entries, shard.size()).ok() ||
        (*entries)[0].offset != 0 || (*entries)[0].nbytes != stored) {
      return nullptr;
    }
  }
  if (!codecs.VerifyChecksummedIdentity(spec, ByteView((*m)->data(), static_cast<size_t>(stored))).ok()) {
    return nullptr;
  }
  (*m)->Shrink(static_cast<size_t>(n));
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
// touch one of this plan's chunks), other than a chunk the host decodes once.
bool ReadsOverlapOtherProcesses(const ArrayToRestore& a, const ArrayRestorePlan& p, const HostShare* share,
                                size_t array) {
  for (const Box& other : a.boxes_of_other_processes) {
    if (other.rank() != p.spec.shape.size()) continue;
    for (size_t c = 0; c < p.chunks.size(); ++c) {
      if (share != nullptr && share->role(array, c) != HostShare::Role::kSelf) continue;
      if (Intersect(p.chunks[c].box, other).num_elements() > 0) return true;
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

// Steps 1 and 2.
struct Opened {
  orbax::OrbaxItem item;
  std::string dir;
  std::vector<ArrayRestorePlan> plans;
};

Result<Opened> OpenAndPlan(const RestoreRequest& request) {
  Opened o;
  if (request.item) {
    o.item = *request.item;
  } else {
    CAIRN_ASSIGN_OR_RETURN(orbax::Location where, orbax::OpenLocation(request.directory));
    CAIRN_ASSIGN_OR_RETURN(orbax::Location item_location,
                           orbax::ResolveItemLocation(where, request.item_name));
    CAIRN_ASSIGN_OR_RETURN(o.item, orbax::OpenItem(item_location));  // pinned (item_store.h)
  }
  o.dir = o.item.location.Path();
  o.plans.resize(request.arrays.size());
  TaskGroup group;
  for (size_t i = 0; i < request.arrays.size(); ++i) {
    group.Run([&, i]() -> Status {
      const ArrayToRestore& a = request.arrays[i];
      CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZarrArray> array, orbax::OpenItemArray(o.item, a.param));
      if (a.dtype && *a.dtype != array->dtype()) {
        return InvalidArgumentError("restoring `" + a.param + "` of " + o.dir + ": stored dtype " +
                                    std::string(DTypeName(array->dtype())) + ", requested " +
                                    std::string(DTypeName(*a.dtype)));
      }
      CAIRN_ASSIGN_OR_RETURN(o.plans[i], PlanArrayRestore(a, std::move(array), o.dir));
      return Status::OK();
    });
  }
  CAIRN_RETURN_IF_ERROR(group.Wait());
  return o;
}

struct Target {
  size_t array;
  size_t chunk;
};

// Step 5 for `targets` (chunks of `plans`): reads and decodes them, whole
// chunks (and shards wholly needed) first, with the index of each shard
// needed only in part; then those shards' inner chunks.
// The bytes of the destinations' parts a chunk (or an inner chunk) fills.
uint64_t PartsBytes(const ArrayRestorePlan& p, const std::vector<PartToFill>& parts) {
  uint64_t bytes = 0;
  for (const PartToFill& part : parts) bytes += static_cast<uint64_t>(part.inter.num_elements());
  return bytes * DTypeSize(p.spec.dtype);
}

Status ReadChunks(KvStore& store, const std::string& dir, const RestoreRequest& request,
                  const std::vector<ArrayRestorePlan>& plans, const std::vector<Target>& targets,
                  HostShare* share, ProgressCounter& progress) {
  auto where_of = [&](size_t a, const std::string& key) {
    return "restoring `" + request.arrays[a].param + "` of " + dir + ": reading " + store.Describe(key);
  };
  // A failed chunk names its array and key; bytes that are wrong (a
  // checksum that differs) also the file and byte range they lie in.
  auto annotated = [&](Status s, size_t a, const std::string& key) {
    if (s.ok()) return s;
    if (s.code() != StatusCode::kDataLoss) return s.Annotate(where_of(a, key));
    return s.Annotate("restoring `" + request.arrays[a].param + "` of " + dir + ": reading " +
                      store.DescribeStored(key));
  };
  std::vector<KeyRead> reads;
  for (const Target& t : targets) {
    const ArrayRestorePlan& p = plans[t.array];
    const ChunkToRead& chunk = p.chunks[t.chunk];
    ByteRange range;
    if (p.sharding != nullptr && !chunk.whole_shard) {
      const uint64_t n = p.sharding->EncodedIndexSize(p.spec);
      range = p.sharding->index_location() == ShardIndexLocation::kEnd ? ByteRange::Suffix(n)
                                                                       : ByteRange::Range(0, n);
    }
    // A whole chunk (or shard) is at most what its codecs can make of it,
    // with slack for other encoders' framing: a server's longer answer is
    // refused as it arrives (KeyRead::max_bytes).
    uint64_t max_bytes = 0;
    if (range.IsAll()) {
      const uint64_t bound = p.array->metadata().codecs.MaxEncodedSize(p.spec);
      if (bound != 0) max_bytes = bound + bound / 8 + (64 << 10);
    }
    reads.push_back({chunk.key, range, max_bytes});
  }
  // Per partly needed shard, its index (empty until read; missing shard: none).
  std::vector<std::optional<std::vector<ShardIndexEntry>>> indexes(reads.size());
  const std::string interrupted = "the restore of " + dir;
  Status first = ReadSliced(store, reads, [&](size_t i, std::optional<ByteView> value) -> Status {
    CAIRN_RETURN_IF_ERROR(CheckInterrupt(request.interrupt, interrupted));
    const ArrayRestorePlan& p = plans[targets[i].array];
    const ChunkToRead& c = p.chunks[targets[i].chunk];
    if (share != nullptr && share->role(targets[i].array, targets[i].chunk) == HostShare::Role::kOwner) {
      Status s = share->DeliverOwned(p, targets[i].array, targets[i].chunk, value);
      if (s.ok()) progress.Add(PartsBytes(p, c.parts));
      return annotated(s, targets[i].array, c.key);
    }
    if (p.sharding == nullptr || c.whole_shard) {
      Status s = DeliverChunk(p, c, value);
      if (s.ok()) progress.Add(PartsBytes(p, c.parts));
      return annotated(s, targets[i].array, c.key);
    }
    if (!value) {
      FillParts(p, c.parts, nullptr, c.box);
      progress.Add(PartsBytes(p, c.parts));
      return Status::OK();
    }
    auto entries = p.sharding->DecodeIndex(p.spec, *value);
    if (!entries.ok()) return annotated(entries.status(), targets[i].array, c.key);
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
        progress.Add(PartsBytes(p, c.inner[k].parts));
        continue;
      }
      inner_reads.push_back({c.key, ByteRange::Range(e.offset, e.nbytes)});
      inner_targets.push_back({targets[i].array, targets[i].chunk, k});
    }
  }
  Status second = ReadSliced(store, inner_reads, [&](size_t i, std::optional<ByteView> value) -> Status {
    CAIRN_RETURN_IF_ERROR(CheckInterrupt(request.interrupt, interrupted));
    const InnerTarget& t = inner_targets[i];
    const ArrayRestorePlan& p = plans[t.array];
    const ChunkToRead& c = p.chunks[t.chunk];
    if (!value) return DataLossError(where_of(t.array, c.key) + ": the shard vanished while reading it");
    Status s = DeliverInner(p, c.inner[t.inner], value);
    if (s.ok()) progress.Add(PartsBytes(p, c.inner[t.inner].parts));
    return annotated(s, t.array, c.key);
  });
  return AsDataLoss(second, "restoring from " + dir + ": a shard index entry points past the shard's end");
}

}  // namespace

Status Restore(const RestoreRequest& request) {
  Result<Opened> opened = OpenAndPlan(request);
  const bool coordinated = request.coordinator != nullptr && request.coordinator->process_count() > 1;
  std::vector<std::vector<bool>> mapped;
  std::unique_ptr<HostShare> share;
  if (opened.ok()) mapped = MapChunks(opened->plans, *opened->item.store);  // step 4
  if (coordinated) {
    static const std::vector<ArrayRestorePlan> kNone;
    share = HostShare::Start(*request.coordinator, request.host_share,
                             opened.ok() ? opened->dir : request.directory, opened.ok(),
                             opened.ok() ? opened->plans : kNone, mapped);
  }
  if (opened.ok()) {
    // Step 3 (after the host's processes agreed who decodes which chunk:
    // a chunk decoded once per host is read once, so not through the cache).
    bool shared = false;
    for (size_t a = 0; a < opened->plans.size() && !shared; ++a) {
      shared = ReadsOverlapOtherProcesses(request.arrays[a], opened->plans[a], share.get(), a);
    }
    opened->item.store->SetReadsShared(shared);
  }
  if (!opened.ok()) {
    if (share != nullptr) share->Run(opened.status(), {}, nullptr);
    return opened.status();
  }
  const std::vector<ArrayRestorePlan>& plans = opened->plans;
  KvStore& store = *opened->item.store;
  // Progress: chunks mapped count as done at once, those other processes
  // of the host decode once shared (below), the rest as they are filled.
  uint64_t total = 0, already = 0;
  for (size_t a = 0; a < plans.size() && request.progress; ++a) {
    for (size_t c = 0; c < plans[a].chunks.size(); ++c) {
      const uint64_t bytes = PartsBytes(plans[a], plans[a].chunks[c].parts);
      total += bytes;
      if (mapped[a][c]) already += bytes;
    }
  }
  ProgressCounter progress(request.progress, total);
  progress.Add(already);

  // Step 5: the chunks shared on this host first, round by round (the
  // other processes wait for this one's), then the rest.
  Status read;
  if (share != nullptr) {
    HostShare::Outcome shared = share->Run(Status::OK(), plans, [&](const HostShare::Chunks& owned) {
      std::vector<Target> targets;
      for (const auto& [a, c] : owned) targets.push_back({a, c});
      return ReadChunks(store, opened->dir, request, plans, targets, share.get(), progress);
    });
    read = shared.status;
    for (size_t a = 0; a < plans.size() && progress.enabled(); ++a) {
      for (size_t c = 0; c < plans[a].chunks.size(); ++c) {
        if (!mapped[a][c] && share->role(a, c) == HostShare::Role::kPeer) progress.Add(PartsBytes(plans[a], plans[a].chunks[c].parts));
      }
    }
    if (request.stats != nullptr) share->AddStats(request.stats);
  }
  std::vector<Target> targets;
  for (size_t a = 0; a < plans.size() && read.ok(); ++a) {
    for (size_t c = 0; c < plans[a].chunks.size(); ++c) {
      if (mapped[a][c]) continue;
      if (share != nullptr && share->role(a, c) != HostShare::Role::kSelf) continue;
      targets.push_back({a, c});
    }
  }
  if (read.ok()) read = ReadChunks(store, opened->dir, request, plans, targets, nullptr, progress);
  if (request.stats != nullptr) request.stats->chunks_read += static_cast<int64_t>(targets.size());
  if (read.ok()) progress.Finish();
  return read;
}

}  // namespace cairn::engine
