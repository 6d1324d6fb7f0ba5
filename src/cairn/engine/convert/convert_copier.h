// The copy phase of a conversion (convert.h): every planned array's
// destination chunks are cut into slabs that fit the memory budget
// (SlabShare, convert_memory.h), read from the source, cast where the dtype
// changes, and handed to the writer, by `threads` workers. A destination
// chunk is written by one worker, in order, never read back. Writers that
// require an order (CheckpointWriter::required_order) get the chunks in that
// order; the slabs in flight then hold their bytes in ticket order, so the
// oldest unwritten slab can always proceed.
#pragma once

#include <vector>

#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_plan.h"

namespace cairn::engine {

// Copies the arrays of `plan` whose index is `rank` modulo `ranks` (all of
// them by default), skipping those `skip` marks as already complete, and
// fills the counters of `stats` (arrays, bytes read and written, the peak
// slab bytes). Returns the first error of any worker.
Status CopyPlannedArrays(layout::CheckpointReader& source, layout::CheckpointWriter& writer,
                         const std::vector<ArrayMapping>& plan, const ConvertOptions& options,
                         int threads, const std::vector<bool>& skip, ConvertStats& stats,
                         int rank = 0, int ranks = 1);

}  // namespace cairn::engine
