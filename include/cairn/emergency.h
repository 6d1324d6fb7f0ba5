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
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
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
  int peer_copies = 0;    // copies of each local step on peers; > 0 needs use_mpi_transport
  bool use_mpi_transport = false;  // peer copies over MPI (programs run by mpirun)
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
};

struct EmergencyRestoreReport {
  std::string tier;  // "local" or "persistent"
  int64_t step = -1;
  uint64_t bytes_from_own_disk = 0;    // read from local steps this host held
  uint64_t bytes_from_peers = 0;       // read from local steps fetched from peers
  uint64_t bytes_from_persistent = 0;  // read from the persistent tier
  std::vector<std::string> log;        // how the step was chosen and gathered
};

// Opened like CheckpointManager (checkpoint_manager.h): a static Open that
// takes the options and the job's Coordinator.
class EmergencyCheckpointManager {
 public:
  // Opens both tiers (collective). Result: the manager, its steps listed.
  // Errors: InvalidArgument for bad options (a compression name, peer
  // copies without a transport); Unimplemented for the MPI transport in a
  // build without MPI; the stores' errors naming the directory;
  // Unavailable when the other processes do not open it within the timeout.
  static Result<std::unique_ptr<EmergencyCheckpointManager>> Open(const EmergencyCheckpointOptions& options,
                                                                  Coordinator& coordinator);
  virtual ~EmergencyCheckpointManager() = default;
  // Result: whether Save(step) would save to either tier.
  virtual bool ShouldSave(int64_t step) const = 0;
  // Saves to the tiers `step` is due in (both with force). Result: false
  // when neither is due. Errors: as CheckpointManager::Save, per tier.
  virtual Result<bool> Save(int64_t step, const std::vector<CheckpointArray>& arrays, bool force = false) = 0;
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
  // WaitUntilFinished, then stops the background work. Errors: its first.
  virtual Status Close() = 0;
};

// EmergencyCheckpointManager::Open, under the name it had first (kept for
// existing callers).
Result<std::unique_ptr<EmergencyCheckpointManager>> OpenEmergencyCheckpointManager(
    const EmergencyCheckpointOptions& options, Coordinator& coordinator);

}  // namespace cairn
