// Orbax as a conversion destination: a CheckpointWriter over the engine's
// save path (orbax_item.h), so the item's files, `_METADATA`, the root
// OCDBT database, `_CHECKPOINT_METADATA` and the commit (commit_success.txt,
// rename) are exactly what a cairn save writes. The difference from a save
// is where the bytes come from: chunks arrive one box at a time from the
// converter (WriteBox), are encoded on the caller's thread and appended to
// this process's OCDBT database, so nothing is held beyond the box.
//
// Protocol (each numbered step finishes before the next starts):
//   1. The primary begins the commit (engine BeginItem: the temporary step
//      and item directories of save `save_id`), unless a pending directory
//      of that very save id is left by an interrupted run of the same
//      conversion and `resume` is set: then it is kept as it is, unless
//      that run got as far as committing the item inside it (the item's
//      commit cannot be done again over it): then the step begins anew.
//   2. Every process writes its chunks (WriteBox) into its own database
//      `ocdbt.process_<i>/` (the primary also each array's zarr metadata).
//      The chunks are committed to the database (a new generation, data
//      files durable first) every `flush_bytes`, at the end of an array:
//      what a generation lists is durable, which is what resume relies on.
//   3. Flush (every process): the last generation, then
//      `array_metadatas/process_<i>`.
//   4. Commit (primary, after every process flushed): `before_commit` writes
//      the step's other files (iterator state, AXLearn's index) into the
//      temporary step directory, then engine FinalizeAndCommit.
//
// Leaves are written as `np.ndarray`: orbax-checkpoint restores them
// without arguments as NumPy arrays and, given restore args, as jax.Arrays
// with the caller's sharding. Tree keys are the destination path split at
// '.'.
//
// Thread safety: WriteBox may be called concurrently (boxes of distinct
// chunks); the other calls from one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cairn/layout/checkpoint_format.h"
#include "cairn/layout/orbax/location.h"

namespace cairn::engine {

struct OrbaxDestinationOptions {
  std::string directory;        // the final step directory (an absolute local path)
  std::string item_name = "default";
  bool use_zarr3 = true;        // false: OCDBT + Zarr v2
  int process_index = 0;
  int process_count = 1;
  std::string save_id;          // the same on every process (16 hex digits)
  bool resume = true;           // keep the pending directory of `save_id`
  uint64_t flush_bytes = uint64_t{256} << 20;
  // Writes the step's non-array files into the temporary step directory.
  std::function<Status(const orbax::Location& step_tmp)> before_commit;
};

// `create`: the primary's writer (step 1); otherwise a writer attached to
// the pending directory the primary created.
Result<std::unique_ptr<layout::CheckpointWriter>> NewOrbaxDestination(
    const std::vector<layout::ArrayInfo>& arrays, const OrbaxDestinationOptions& options,
    bool create);

// A save id that depends only on `text` (FNV-1a, 16 hex digits): the same
// conversion run again finds its own pending directory, another one does not.
std::string DeterministicSaveId(std::string_view text);

}  // namespace cairn::engine
