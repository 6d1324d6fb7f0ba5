// EmergencyCheckpointManager: frequent local checkpoints on every host, copies
// on peers in other data-parallel replicas, and a persistent tier; a restore
// that survives losing hosts.
//
// Save protocol for one step (every process calls Save with the same step):
//   1. Wait for the previous step's background work (its local write,
//      replication and retention; its persistent commit).
//   2. Local tier (step % local interval == 0): the engine saves, with a
//      single-process coordinator, every shard this process holds
//      (LocalTierSave::write_all_held_shards) into `<local>/<step>/state/`
//      under `ocdbt.process_<i>/`, plus `process_metadata/` and the record
//      cairn_local_step.json (local_step.h), all committed at once (rename).
//   3. Persistent tier (step % persistent interval == 0): a normal engine
//      save with the job's coordinator into `<persistent>/<step>/default/`,
//      replica 0's shards only (Orbax's single-replica persistent save).
//   Save returns once both snapshots are taken (the caller may change its
//   arrays), except for shards marked immutable (engine/save_request.h,
//   a jax.Array's): the engine reads those in the background, and Save's
//   `hold` keeps them alive until both writes have finished (then the
//   background thread drops it, before replication ends). The rest runs on
//   a background thread:
//   4. When the local write is durable: send the step to each peer
//      (peer_plan.h) and receive the peers' steps into
//      `<local>/peer_copies/process_<o>/<step>/` (dir_transfer.h: checksummed,
//      within the memory budget, committed by rename). A failed local save
//      sends its failure instead, so the peer does not wait.
//   5. Retention: keep the newest `local_max_to_keep` own steps and copies
//      per owner; the primary keeps the newest `persistent_max_to_keep`
//      persistent steps after a persistent commit. Every old step goes by
//      the crash-safe deletion of retention.h (engine::DeleteStep: renamed
//      out of sight, or its marker removed, before anything else), and Open
//      removes what a crash left of one. Unfinished receipts of this step
//      and older ones (pending directories a killed transfer left) are
//      removed too (dir_transfer.h RemoveUnfinishedReceipts).
//   WaitUntilFinished returns the first error of steps 2-5.
//
// Restore protocol (collective; PrepareRestore then Restore), in full at the
// top of manager_restore.cc:
//   1. Wait for background work. Every process lists the local steps and
//      peer copies it holds; the primary lists the persistent steps;
//      AllGather.
//   2. ChooseStep (step_choice.h) on the gathered lists: the same answer on
//      every process.
//   3. Local tier: every process that holds no copy of the chosen step
//      fetches one (its own old step if it survives elsewhere, else one of
//      a process with the same replica slot, else any), so that it can read
//      the tree's metadata; its holder sends in the background and goes on.
//   4. Restore works out which saved boxes cover the boxes each process
//      wants and reads at once those on its disk (so the healthy processes
//      read while a lost host fetches), then fetches the owners' steps it
//      still lacks from their holders (AllGather of the needs, then
//      point-to-point transfers into `<local>/peer_restore/`) and reads them.
//   5. AgreeOnStatus, after every read and send. On any failure of any
//      process (a fetch of step 3 included), every process drops its
//      mappings and restores from the newest persistent step instead (the
//      same step everywhere).
//   The report says which step and tier, and where each byte came from.
//
// Why the local tier looks as it does: it lives on a RAM disk or local SSD,
// where a restore should cost a copy of the bytes, or nothing: it is not
// compressed by default (a zstd decode on a few cores is what a restore of a
// compressed tier spends its time on), and every OCDBT value of 4 KiB or
// more starts on a 4 KiB boundary (zero bytes pad the gap), so a restore can
// hand out a chunk's pages as a mapping (kvstore/mapped_read.h) instead of
// copying them. Readers use a value's offset and length, so the padding is
// legal OCDBT that Orbax and TensorStore read.
//
// Thread safety: one thread drives a manager (as with the engine).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/emergency/local_step.h"
#include "cairn/emergency/peer_plan.h"
#include "cairn/emergency/step_choice.h"
#include "cairn/emergency/transport.h"
#include "cairn/engine/byte_budget.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"

namespace cairn::emergency {

struct EmergencyOptions {
  std::string local_directory;       // this process's own fast storage
  std::string persistent_directory;  // shared by every process
  int num_replicas = 1;              // data-parallel replicas (peer_plan.h)
  int peer_copies = 1;               // copies of each local step on peers
  int64_t local_save_interval_steps = 1;
  int local_max_to_keep = 2;
  int64_t persistent_save_interval_steps = 10;
  int persistent_max_to_keep = 0;    // 0: keep every persistent step
  // Storage options of both tiers (use_ocdbt, use_zarr3, compression,
  // memory_budget_bytes, timeout); the tier-specific ones are set here.
  engine::SaveOptions save;
  // The local tier's compression; nullopt: save.compression. None by
  // default: the local tier is a RAM disk or local SSD, where a restore
  // should cost a copy of the bytes, not a decode of them.
  std::optional<engine::Compression> local_compression = engine::Compression::kNone;
  uint64_t transfer_piece_bytes = uint64_t{16} << 20;
  // Observer: called with a named point and the step being saved, on the
  // thread that reaches it: the engine's points of the local save
  // (checkpoint_manager.h: data_written, before_item_commit,
  // before_step_commit), the transfer's (dir_transfer.h:
  // transfer_half_sent, transfer_half_received) and retention's deletions
  // (step_retention.h: before_delete_rename, delete_renamed). Crash tests
  // pass one that kills the process there; the manager itself never does.
  std::function<void(std::string_view point, int64_t step)> at_point;
  // The budget snapshots and transfers count against, shared with the
  // caller's other saves; null: the manager's own of
  // save.memory_budget_bytes (ByteBudget::kDefaultBytes when 0).
  std::shared_ptr<engine::ByteBudget> budget;
  // `process_metadata/` files as Orbax writes them (device ids); empty:
  // one pseudo-device per process ([[0], [1], ...] and [0, 1, ...]).
  std::string global_process_metadata_json;
  std::string mesh_metadata_json;
};

struct PreparedRestore {
  StepChoice choice;
  // An item directory of the chosen step this process can read the tree
  // metadata from ("" for a fresh start).
  std::string metadata_item;
  std::vector<std::string> log;
  uint64_t bytes_fetched = 0;
  // Owners of the chosen local step whose data is on this process's disk.
  std::map<int, orbax::Location> on_disk;
  std::map<int, std::string> on_disk_source;  // how it got there, for the log
  // This process's fetch of step 3 failed (not yet agreed on: Restore
  // reads nothing and makes every process fall back).
  Status failure;
};

struct RestoreReport {
  StepChoice::Tier tier = StepChoice::Tier::kNone;
  int64_t step = -1;
  uint64_t bytes_from_own_disk = 0;    // read from steps this host held
  uint64_t bytes_from_peers = 0;       // read from steps fetched from peers
  uint64_t bytes_fetched = 0;          // moved over the transport
  uint64_t bytes_from_persistent = 0;
  // Of the local bytes, those handed out as mappings of a RAM disk's pages
  // (engine/restore.h BoxToRestore::mapped) instead of copied.
  uint64_t bytes_mapped = 0;
  std::vector<std::string> log;
};

class EmergencyCheckpointManager {
 public:
  // `transport` may be null when peer_copies is 0. The coordinator and
  // transport must outlive the manager. Removes what crashed runs left:
  // interrupted deletions (retention.h step 3) and temporary step
  // directories of gone owners (layout/orbax/step.h step 6), in this
  // process's local directory and (the primary) the persistent one.
  static Result<std::unique_ptr<EmergencyCheckpointManager>> Open(
      EmergencyOptions options, Coordinator& coordinator, std::shared_ptr<PeerTransport> transport);
  ~EmergencyCheckpointManager();

  bool ShouldSaveLocal(int64_t step) const;
  bool ShouldSavePersistent(int64_t step) const;
  bool ShouldSave(int64_t step) const { return ShouldSaveLocal(step) || ShouldSavePersistent(step); }

  // Saves `leaves` (engine/save_request.h) as `step` to the tiers whose
  // interval it hits (both with force). Returns whether it saved anything.
  // Shards marked immutable are not copied before Save returns: their
  // buffers must stay valid and unchanged until the local and persistent
  // writes have read them. `hold` (may be null: the caller keeps them alive
  // until WaitUntilFinished) owns whatever keeps them so; the manager drops
  // it on the background thread as soon as both writes have finished (or at
  // once when nothing is due), before WaitUntilFinished returns.
  Result<bool> Save(int64_t step, const std::vector<engine::SaveLeaf>& leaves, bool force = false,
                    std::shared_ptr<void> hold = nullptr);
  Status WaitUntilFinished();

  // Collective: steps a restore could use (complete local steps and
  // persistent steps), ascending.
  Result<std::vector<int64_t>> AllSteps();
  Result<std::optional<int64_t>> LatestStep();

  // Collective (see the protocol above). `step`: nullopt for the latest.
  Result<PreparedRestore> PrepareRestore(std::optional<int64_t> step);
  Result<RestoreReport> Restore(PreparedRestore& prepared, std::vector<engine::ArrayToRestore> arrays);
  // PrepareRestore + Restore.
  Result<RestoreReport> RestoreStep(std::optional<int64_t> step, std::vector<engine::ArrayToRestore> arrays);

  // Waits for background work; returns its status.
  Status Close();

  const EmergencyOptions& options() const { return options_; }

 private:
  EmergencyCheckpointManager(EmergencyOptions options, Coordinator& coordinator,
                             std::shared_ptr<PeerTransport> transport);
  void Background(int64_t step, bool local_due, const Status& local_status,
                  std::unique_ptr<engine::PendingSave> local, std::unique_ptr<engine::PendingSave> persistent,
                  std::shared_ptr<void> hold);
  Status Replicate(int64_t step, const Status& local_status);
  Status ApplyRetention(int64_t step, bool persistent_committed);
  Result<std::pair<std::vector<Holding>, std::vector<int64_t>>> Exchange(std::string_view what);
  // Collective: gathers every process's needed owners, then sends and
  // receives this process's transfers on tags from `first_tag`; sends run
  // on restore_sends_ when `send_in_background`. Returns this process's
  // outcome (not agreed on).
  Status Fetch(PreparedRestore& prepared, const std::vector<int>& owners, std::string_view phase, int first_tag,
               bool send_in_background);
  // Joins restore_sends_; the first failure.
  Status JoinRestoreSends();
  Result<RestoreReport> RestorePersistent(int64_t step, const std::vector<engine::ArrayToRestore>& arrays,
                                          std::vector<std::string> log);

  EmergencyOptions options_;
  Coordinator& coordinator_;
  std::unique_ptr<Coordinator> alone_;  // for the local tier
  std::shared_ptr<PeerTransport> transport_;
  ReplicaLayout layout_;
  orbax::Location local_;
  orbax::Location persistent_;
  std::shared_ptr<engine::ByteBudget> budget_;
  std::thread worker_;
  Status background_status_;
  int fetch_round_ = 0;
  // Sends of a restore's step 3 still at work (joined by Restore, the next
  // PrepareRestore and Close).
  struct PendingSend {
    std::thread thread;
    Status result;
  };
  std::list<PendingSend> restore_sends_;
};

}  // namespace cairn::emergency
