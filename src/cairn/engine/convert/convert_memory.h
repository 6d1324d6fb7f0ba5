// What a conversion may hold in memory, and how its budget is shared.
//
// The peak resident set of a conversion is bounded by its memory budget
// plus a fixed overhead (the process, thread stacks, zstd contexts, the
// OCDBT node cache, allocator slack), whatever the checkpoint's size. The
// budget pays for three things:
//
//   1. The block cache of freed large Buffers (util/buffer.h): capped at
//      what the charges in flight leave of the budget (CacheShareBeside),
//      never less than BlockCacheShare(budget). Freed chunk buffers are
//      reused for the next chunks instead of being unmapped and mapped and
//      page-faulted afresh: a cap of a quarter of the budget kept fewer
//      blocks than the workers cycle through (a 2 GiB Orbax -> AXLearn
//      conversion faulted in 860 MiB of fresh pages).
//   2. Slabs in flight: each slab's own bytes (source bytes, plus the cast
//      destination bytes).
//   3. What the reader and the writer hold beside the slab while they
//      handle it (CodecBytes): formats of zarr arrays decode one chunk at a
//      time (its stored bytes and its decoded bytes) and encode one chunk
//      at a time (a copy of it and its encoded bytes); safetensors reads
//      into and writes from the slab itself.
//
// A destination chunk that is also one whole source chunk of the same
// dtype is not copied through a slab: the reader hands over the chunk it
// decoded and the writer encodes straight from it (WholeChunkCharge). It
// holds the decoded chunk, beside it first the stored source bytes (freed
// once decoded) and then what the writer holds (AXLearn: the encoded
// bytes; others: CodecBytes), so it is charged the decoded chunk plus the
// larger of the two.
//
// A slab is charged (2) + (3) before its buffer is allocated and released
// after it is written, so slabs in flight never charge more than
// budget - BlockCacheShare(budget), and cached blocks plus charges in
// flight never exceed the budget. Destination chunks are shrunk so that
// two slabs fit (FitShare), but only in whole multiples of the piece the
// source decodes at once (ArrayInfo::read_shape): a destination chunk cut
// across a source chunk would decode that chunk once per cut (a 2 GiB
// array in 256 MiB chunks read 4x from disk at a 512 MiB budget). A chunk
// whose charge is over the slab share runs alone, charged at most the whole
// budget (the block cache then gives up its share), so every stored chunk
// is read once as long as the budget holds one source chunk and one
// destination chunk (MinimumBudget); a smaller budget is refused before
// anything is written.
//
// Thread safety: pure functions; BlockCacheLimit changes a process-wide
// setting for its lifetime.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/engine/convert/convert_plan.h"

namespace cairn::engine {

// Codec buffers of zarr formats beyond the chunk (zstd's bound for a
// chunk, headers, a shard index): a small fixed slack per chunk.
inline constexpr uint64_t kCodecSlackBytes = uint64_t{64} << 10;

// The share of the budget the block cache may keep: a quarter.
uint64_t BlockCacheShare(uint64_t budget);

// What slabs in flight may charge: the budget less the block cache's share.
uint64_t SlabShare(uint64_t budget);

// The block cache's cap while slabs charging `in_flight` bytes are in
// flight: the rest of the budget (at least BlockCacheShare(budget), since
// charges up to the slab share share it). One chunk that runs alone over
// the slab share leaves the cache what it leaves of the whole budget
// (convert_copier.cc).
uint64_t CacheShareBeside(uint64_t budget, uint64_t in_flight);

// Source bytes plus, when transposing (ArrayMapping::source_axes), the
// source bytes rearranged, plus, when casting, destination bytes, per element.
uint64_t SlabBytesPerElement(const ArrayMapping& m);

// Bytes a reader (or writer) of `format` holds beside the slab while it
// reads (or writes) a slab of array `a`: 0 for safetensors, else twice a
// chunk of `a.read_shape` (when set, else `a.write_shape`) plus
// kCodecSlackBytes.
uint64_t CodecBytes(std::string_view format, const layout::ArrayInfo& a);

// The charge of a slab of `elements` elements of mapping `m`.
uint64_t SlabCharge(const ArrayMapping& m, uint64_t elements, std::string_view source_format,
                    std::string_view dest_format);

// At most what a chunk of `chunk_bytes` decoded bytes takes when
// compressed (zstd's bound with room to spare, a shard index).
uint64_t StoredBound(uint64_t chunk_bytes);

// The charge of a whole chunk of `elements` elements of mapping `m` copied
// by the whole-chunk path (above).
uint64_t WholeChunkCharge(const ArrayMapping& m, uint64_t elements, std::string_view dest_format);

// The most a destination chunk may charge: SlabShare(budget) / 2 (at
// least 4096), so that two can be in flight, one written while the next is
// read. More workers run when the chunks are smaller.
uint64_t FitShare(uint64_t budget);

// Per element of a destination chunk, what it charges when written by a
// writer of zarr arrays: the slab plus the writer's copy and encoded bytes
// (the reader's codec bytes depend on the source chunk, not on the fit).
uint64_t FitBytesPerElement(const ArrayMapping& m);

// The elements of one piece of `a` its reader decodes at once
// (ArrayInfo::read_shape, clipped to the array); 0 when it has none.
uint64_t ReadUnitElements(const layout::ArrayInfo& a);

// The bands in which an ordered writer (safetensors) takes the transposed
// array `m` (ArrayMapping::source_axes): its rows are columns of the
// source, so a band that is not a whole number of the source pieces'
// columns decodes every piece it crosses once per band (a 250 MiB kernel in
// row pieces, in 1 MiB bands: 250 decodes of each piece). The shape of the
// largest band of whole units within `slab_limit`, else of one unit when it
// fits the budget beside `codecs` (it then runs alone); empty when `m` is
// not transposed, the source reads no pieces, or one unit is over the
// budget (then slabs cut across pieces, each decoded once per slab that
// crosses it).
Shape TransposedBand(const ArrayMapping& m, uint64_t slab_limit, uint64_t budget, uint64_t codecs);

// The least budget that copies array `m` reading each stored chunk once:
// one decoded source chunk (ReadUnitElements) and one destination chunk of
// the same elements (and, when transposing, the chunk rearranged) (so a
// budget that holds them never re-reads). 0 when
// the source reads boxes without decoding more (safetensors).
uint64_t MinimumBudget(const ArrayMapping& m);

// Below this, a budget cuts destination chunks so small that a conversion
// writes many tiny chunks slowly (1 MiB of safetensors to Orbax at 4 KiB:
// 1,277 files in 8.4 s, against 18 files in 0.4 s).
inline constexpr uint64_t kRecommendedLeastBudget = uint64_t{1} << 20;

// The warning for a budget under kRecommendedLeastBudget that cuts a
// destination chunk of `m` (planned as `planned`, fitted to `fitted`):
// names the budget, the array, the chunk it gets and the recommended
// budget in the forms the CLI and Python take; "" when there is nothing
// to warn about.
std::string SlowBudgetWarning(uint64_t budget, const ArrayMapping& m, const Shape& planned,
                              const Shape& fitted);

// A byte count rounded up to what users type: whole MiB from 1 MiB on,
// whole KiB from 1 KiB on ("513MiB", "96KiB", "100B"), and that count in
// bytes.
std::string FormatBudget(uint64_t bytes);
uint64_t RoundUpBudget(uint64_t bytes);

// Makes malloc map blocks of 1 MiB and up and unmap them when freed (glibc:
// a fixed M_MMAP_THRESHOLD; elsewhere nothing). glibc's default raises the
// threshold to the largest block freed (up to 32 MiB), after which freed
// chunk buffers stay in its per-thread arenas: a conversion in 32 MiB
// chunks then peaked at 1.4 GiB with a 512 MiB budget. Process-wide, once;
// BlockCacheLimit (so every conversion) calls it.
void ReturnLargeBlocksToTheSystem();

// Caps the block cache at BlockCacheShare(budget) (never raising it) for
// its lifetime; while the copy runs, the converter moves the cap with the
// charges in flight (CacheShareBeside), and this puts back the cap that
// was there before.
class BlockCacheLimit {
 public:
  explicit BlockCacheLimit(uint64_t budget);
  ~BlockCacheLimit();
  BlockCacheLimit(const BlockCacheLimit&) = delete;
  BlockCacheLimit& operator=(const BlockCacheLimit&) = delete;

 private:
  size_t previous_;
};

}  // namespace cairn::engine
