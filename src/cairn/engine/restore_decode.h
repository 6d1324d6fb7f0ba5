// Decoding what a restore read into the parts of the destinations it fills
// (restore.h, restore_plan.h): straight into a destination where a chunk
// fills one C-contiguous part of it, else through a chunk-sized buffer whose
// parts are copied out; where no codec changes the bytes they are copied
// straight from the read buffer. Used by the restore itself and by the
// chunks decoded once per host (restore_host_share.h).
//
// Thread safety: functions over a plan that is not modified meanwhile; two
// calls write the same destination bytes only if their parts overlap.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cairn/engine/restore_plan.h"
#include "cairn/util/buffer.h"

namespace cairn::engine {

// The linear index of `cell` in a C-order grid.
size_t Linear(const std::vector<Index>& cell, const Shape& grid);

// Copies each part from `src` (a C-order block covering `src_box`), or
// fills it with the fill value when `src` is null.
void FillParts(const ArrayRestorePlan& p, const std::vector<PartToFill>& parts, const uint8_t* src,
               const Box& src_box);

// Where a chunk of `box` can be decoded straight into its destination: when
// `parts` is one part covering the whole chunk and the destination holds that
// box C-contiguously. Empty otherwise.
MutableByteView WholeChunkDestination(const ArrayRestorePlan& p, const std::vector<PartToFill>& parts,
                                      const Box& box);

// The slot (BoxToRestore::mapped) of the destination chunk `c` fills, when
// its one part is its whole box, which is a whole destination that asks for
// a mapping and holds it C-contiguously: then the chunk's decoded elements,
// in C order, can be handed out as the destination. Null otherwise. Whether
// the bytes to hand out are at hand is the caller's question.
std::shared_ptr<MappedBytes>* WholeChunkMappedSlot(const ArrayRestorePlan& p, const ChunkToRead& c);

// Decodes chunk `c` (its stored value, or nullopt when missing: fill
// value) into its parts; for a sharded array, its index then the inner
// chunks the plan needs.
Status DeliverChunk(const ArrayRestorePlan& p, const ChunkToRead& c, std::optional<ByteView> value);

// Decodes one inner chunk of a shard (nullopt: missing, fill value).
Status DeliverInner(const ArrayRestorePlan& p, const InnerChunkToRead& ic, std::optional<ByteView> bytes);

}  // namespace cairn::engine
