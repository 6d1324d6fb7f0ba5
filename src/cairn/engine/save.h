// Asynchronous save of one Orbax PyTree checkpoint from every process.
//
// StartSave returns once the shards this process writes (save_plan.h) are
// copied into memory counted against a ByteBudget, so the caller may then
// overwrite its buffers (immutable shards, such as a jax.Array's, are not
// copied up front: save_request.h). When the snapshot would exceed the budget it waits
// only until enough earlier chunks are written. Encoding and writing run on
// the shared thread pool, all arrays' chunks together, each chunk streamed
// from its snapshot through the codecs (zarr/chunk_encoder.h) straight into
// the process's store (kvstore/batch_writer.h: appended to the OCDBT data
// files, no staging store). PendingSave::Wait returns after the durable
// commit, with the first error of any process.
//
// Protocol (every process runs it; collectives are named
// "cairn/save/<final dir>/<step>"):
//   1. Plan (check the request). The primary creates the temporary
//      directories (`<dir>.orbax-checkpoint-tmp`, and the item's inside it
//      for a step layout). AgreeOnStatus: any failure fails the save on
//      every process before anything is written.
//   2. compression=auto only: every process samples (128 KiB of) its first piece of each
//      array; AllGather; an array is compressed unless every process that
//      sampled it found that zstd saves less than 10%.
//   3. Snapshot (StartSave returns after this) and write in the background:
//      pieces of immutable shards are not snapshotted here but read by the
//      background thread, chunk by chunk within the same budget, while the
//      writes run (a whole chunk lying contiguously in such a buffer is
//      encoded or written straight from it, without a copy); every chunk this process owns is encoded and added to its store (its
//      own OCDBT database `ocdbt.process_<i>/`, or per-array directories);
//      the primary also adds each array's Zarr metadata. Then the store's
//      batch is committed (data files durable, then the manifest) and
//      `array_metadatas/process_<i>` written.
//   4. AgreeOnStatus: every process has written everything durably.
//   5. The primary writes `_strings.json`, `_sharding`, `_METADATA`, merges
//      the process databases under the root manifest, writes
//      `_CHECKPOINT_METADATA` and commits (commit_success.txt, rename;
//      innermost first). Until this rename no reader sees the checkpoint.
//   6. AgreeOnStatus: every process learns whether the commit happened.
// A shards-only save (SaveOptions::shards_only, Pathways colocated Python:
// engine/colocated.h) stops after step 4; its controller does step 5.
//
// Thread safety: a PendingSave may be waited on from any one thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "cairn/coordinator.h"
#include "cairn/engine/byte_budget.h"
#include "cairn/engine/save_request.h"
#include "cairn/kvstore/kvstore.h"

namespace cairn::engine {

class PendingSave {
 public:
  virtual ~PendingSave() = default;
  // Blocks until the save is committed (or failed); returns its status.
  // Later calls return the same status.
  virtual Status Wait() = 0;
  // True once Wait would return without blocking.
  virtual bool done() const = 0;
  // The final directory (the item directory, or the step directory).
  virtual const std::string& directory() const = 0;
};

struct SaveHooks {
  // Test hook: wraps the store this process writes its chunks into (e.g.
  // with a fault-injecting store).
  std::function<std::shared_ptr<KvStore>(std::shared_ptr<KvStore>)> wrap_process_store;
};

// The process-wide budget used when a request sets no memory_budget_bytes.
ByteBudget& DefaultByteBudget();

// Starts saving `request` (see the protocol above). Errors of steps 1-2 are
// returned here (on every process alike); later ones from Wait. `budget`:
// null = a budget of options.memory_budget_bytes for this save, or the
// process-wide default when that is 0.
Result<std::unique_ptr<PendingSave>> StartSave(const SaveRequest& request, Coordinator& coordinator,
                                               ByteBudget* budget = nullptr,
                                               const SaveHooks& hooks = {});

// StartSave + Wait.
Status Save(const SaveRequest& request, Coordinator& coordinator);

}  // namespace cairn::engine
