// cairn's emergency checkpoints, for C++ programs: frequent local
// checkpoints on every host (its own fast storage), copies on peers in other
// data-parallel replicas, an infrequent persistent tier (normal Orbax
// checkpoints), and a restore that survives losing hosts. docs/EMERGENCY.md
// describes the layout and protocols.
//
// Contract:
//   - Every process of the job opens the manager with the same options
//     (except local_directory: its own) and the same Coordinator, and calls
//     the same methods in the same order. Save takes this process's shards
//     as engine.h's SaveCheckpoint does.
//   - Save returns once this process's shards are copied; writing, peer
//     copies and retention run in the background. WaitUntilFinished returns
//     their first error.
//   - Restore (collective) fills the requested boxes from the newest step the
//     surviving hosts hold completely, else from the newest persistent step,
//     on every process alike; the report says which and where bytes came
//     from.
//
// Thread safety: one thread drives a manager.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/engine.h"
#include "cairn/result.h"

namespace cairn {

// Where the tiers are, how often each saves and how many steps each keeps;
// how steps are stored is `save`.
struct EmergencyCheckpointOptions {
  std::string local_directory;       // this process's own fast storage
  std::string persistent_directory;  // shared by every process
  int num_replicas = 1;   // data-parallel replicas, processes split in order
  // The peer transport: "mpi" (programs run by mpirun), "zmq" (ZeroMQ),
  // "none", or "" to pick from the job: MPI when mpirun started exactly
  // the coordinator's processes, else ZeroMQ when built with it, else none
  // (a job of one process: none).
  std::string transport = "none";
  // Copies of each local step on peers; unset: one when there is a
  // transport and more than one replica, else none. Copies without a
  // transport are InvalidArgument.
  std::optional<int> peer_copies;
  std::string zmq_host;  // the ZeroMQ transport listens here; "": this host's name
  int64_t local_save_interval_steps = 1;
  int local_max_to_keep = 2;
  int64_t persistent_save_interval_steps = 10;
  int persistent_max_to_keep = 0;  // 0: keep all
  // Both tiers' storage options (engine.h). The local tier's compression is
  // `local_compression`'s.
  SaveCheckpointOptions save;
  // The local tier's compression: "none" (a restore from it is a copy), or
  // a name as SaveCheckpointOptions::compression; "" for save.compression.
  std::string local_compression = "none";
  // `process_metadata/` files as Orbax writes them (its device ids, as
  // JSON text); empty: one pseudo-device per process.
  std::string global_process_metadata_json;
  std::string mesh_metadata_json;
  // Observer, called with a named point and the step being saved on the
  // thread that reaches it (the local save's, the peer transfer's and
  // retention's points, docs/EMERGENCY.md); crash tests stop the process
  // there. Empty: none.
  std::function<void(std::string_view point, int64_t step)> at_point;
};

// Where a restore will read from, chosen by PrepareRestore.
struct EmergencyRestorePlan {
  std::string tier;  // "local", "persistent" or "none" (nothing to restore)
  int64_t step = -1;
  // An item directory of the step this process can read the tree's
  // metadata from ("" for none).
  std::string metadata_item;
  std::vector<std::string> log;  // how the step was chosen and gathered
};

// A restored box handed out as the stored chunk's own pages (a RAM disk's)
// instead of being copied into its destination (RestorePrepared with
// map_boxes).
struct MappedBox {
  size_t array_index = 0;  // in the request
  size_t box_index = 0;    // in that array's boxes
  // The box's elements in C order; the mapping lives as long as this
  // pointer (or a copy) does, also after the step is deleted.
  std::shared_ptr<uint8_t> data;
  size_t size = 0;  // bytes
};

struct EmergencyRestoreReport {
  std::string tier;  // "local" or "persistent"
  int64_t step = -1;
  uint64_t bytes_from_own_disk = 0;    // read from local steps this host held
  uint64_t bytes_from_peers = 0;       // read from local steps fetched from peers
  uint64_t bytes_from_persistent = 0;  // read from the persistent tier
  std::vector<std::string> log;        // how the step was chosen and gathered
  uint64_t bytes_fetched = 0;          // moved over the peer transport
  uint64_t bytes_mapped = 0;           // of the local bytes, those mapped (MappedBox)
  std::vector<MappedBox> mapped;       // the boxes mapped instead of filled
};

// Opened like CheckpointManager (checkpoint_manager.h): a static Open that
// takes the options and the job's Coordinator.
class EmergencyCheckpointManager {
 public:
  // Opens the transport and both tiers (collective). Result: the manager,
  // its steps listed. Errors: InvalidArgument for bad options (a
  // compression name, a transport name, peer copies without a transport);
  // Unimplemented for a transport this build lacks; the stores' errors naming the directory;
  // Unavailable when the other processes do not open it within the timeout.
  static Result<std::unique_ptr<EmergencyCheckpointManager>> Open(const EmergencyCheckpointOptions& options,
                                                                  Coordinator& coordinator);
  virtual ~EmergencyCheckpointManager() = default;
  // Result: whether Save(step) would save to either tier.
  virtual bool ShouldSave(int64_t step) const = 0;
  // Result: whether Save(step) would save to the local tier.
  virtual bool ShouldSaveLocal(int64_t step) const = 0;
  // Result: whether Save(step) would save to the persistent tier.
  virtual bool ShouldSavePersistent(int64_t step) const = 0;
  // Saves to the tiers `step` is due in (both with force). Result: false
  // when neither is due. `hold` (may be null) is dropped, on the manager's
  // background thread, once both tiers have read the immutable shards.
  // Errors: as CheckpointManager::Save, per tier.
  virtual Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force = false,
                            std::shared_ptr<void> hold = nullptr) = 0;
  // Errors: the first error of the background writing, peer copies and
  // retention.
  virtual Status WaitUntilFinished() = 0;
  // Collective. Result: the steps a restore could use (local steps the job
  // holds whole, persistent steps), ascending. Errors: Unavailable when the
  // other processes do not arrive; the stores' errors.
  virtual Result<std::vector<int64_t>> AllSteps() = 0;
  // Collective. Result: the newest of AllSteps, or nullopt. Errors: as AllSteps.
  virtual Result<std::optional<int64_t>> LatestStep() = 0;
  // Collective. `step`: nullopt for the newest usable step. Every array needs
  // its dtype. Result: which tier and step, and where the bytes came from.
  // Errors: InvalidArgument for an array without a dtype or boxes outside
  // it; NotFound when no tier holds the step; DataLoss for a corrupt chunk
  // (naming the array); Unavailable when the other processes do not arrive.
  virtual Result<EmergencyRestoreReport> Restore(std::optional<int64_t> step,
                                                 const std::vector<RestoreArray>& arrays) = 0;
  // Restore in two collective halves, for callers that need the tree's
  // metadata to say which boxes they want: PrepareRestore chooses the step
  // (nullopt: the newest usable) and gathers its local data from peers;
  // RestorePrepared then fills the boxes (dtype optional) from it, mapping
  // them instead where `map_boxes` and the chunk allow (report.mapped).
  // Errors: PrepareRestore: as AllSteps; RestorePrepared: FailedPrecondition
  // ("restore before prepare_restore") without a prepared restore, else as
  // Restore.
  virtual Result<EmergencyRestorePlan> PrepareRestore(std::optional<int64_t> step) = 0;
  virtual Result<EmergencyRestoreReport> RestorePrepared(const std::vector<RestoreArray>& arrays,
                                                         bool map_boxes = false) = 0;
  // WaitUntilFinished, then stops the background work. Errors: its first.
  virtual Status Close() = 0;
};

// Result: whether this build has the ZeroMQ peer transport.
bool ZmqTransportAvailable();

// EmergencyCheckpointManager::Open, under the name it had first (kept for
// existing callers).
Result<std::unique_ptr<EmergencyCheckpointManager>> OpenEmergencyCheckpointManager(
    const EmergencyCheckpointOptions& options, Coordinator& coordinator);

}  // namespace cairn
