// The record cairn keeps with every local emergency step, and finding the
// local steps and peer copies a host holds.
//
// Layout of one process's local directory (Orbax's local layout, plus
// cairn's record and the copies it keeps for peers):
//   <local>/<step>/                       this process's own local step
//       _CHECKPOINT_METADATA, commit_success.txt
//       state/                            the PyTree item: every shard this
//                                         process held, in its own
//                                         `ocdbt.process_<i>/` database
//       process_metadata/global_process_metadata.json, mesh_metadata.json
//       cairn_local_step.json             the record below
//   <local>/peer_copies/process_<o>/<step>/   a byte copy of process o's step
//   <local>/peer_restore/...              steps fetched from peers while
//                                         restoring (removed afterwards)
//
// cairn_local_step.json: {"format": "cairn.emergency.local_step",
//   "version": 1, "step": S, "process_index": o, "process_count": N,
//   "num_replicas": R, "arrays": {"<param>": {"dtype": "float32", "shape": [...],
//   "boxes": [[[origin...], [shape...]], ...]}}} — which boxes of which
// arrays the step holds, so that a restart can tell, without reading any
// array, whether the steps that survive hold every shard.
//
// What Orbax's emergency CheckpointManager needs of this layout to restore
// it, and gets: step directories named by the step directly in <local>
// (its listing skips peer_copies/ and cairn_emergency.json); every process
// of a replica holding the step; a `state` item whose root database gives
// each process the shards of its own devices (it reads its part with the
// shardings of the restore mesh it builds from process_metadata/); and the
// device ids in jax's numbering, so that they map to the restarted job's
// devices.
//
// Thread safety: pure functions and reads of the store.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cairn/layout/orbax/location.h"
#include "cairn/util/box.h"
#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::emergency {

inline constexpr std::string_view kLocalStepRecord = "cairn_local_step.json";
inline constexpr std::string_view kStateItem = "state";
// Chunks of at least this many bytes start at a multiple of it in the local
// tier's OCDBT data files (LocalTierSave::ocdbt_value_alignment), so that a
// restore from a RAM disk can map them (engine/restore.h).
inline constexpr uint64_t kLocalValueAlignment = 4096;
inline constexpr std::string_view kProcessMetadataItem = "process_metadata";
inline constexpr std::string_view kPeerCopiesDir = "peer_copies";
inline constexpr std::string_view kPeerRestoreDir = "peer_restore";

struct StoredArray {
  std::string dtype;  // cairn's dtype name ("float32")
  Shape shape;
  std::vector<Box> boxes;  // distinct boxes held
};

struct LocalStepRecord {
  int64_t step = 0;
  int process_index = 0;  // the owner: the process that saved it
  int process_count = 1;
  int num_replicas = 1;
  std::map<std::string, StoredArray> arrays;  // by Orbax param name
};

Json LocalStepRecordToJson(const LocalStepRecord& record);
// InvalidArgument naming `what` and the field for anything malformed.
Result<LocalStepRecord> LocalStepRecordFromJson(const Json& j, std::string_view what);

// A local step or a peer copy held by some process.
struct Holding {
  enum class Kind { kOwn, kPeerCopy };
  Kind kind = Kind::kOwn;
  int holder = 0;           // the process holding it now (filled in by the exchange)
  LocalStepRecord record;   // owner and step inside
};

// The finalized local steps (<local>/<step>/ with commit_success.txt and a
// readable record, or for a step without a record one Orbax's emergency
// manager wrote: orbax_local_step.h) and the peer copies below
// <local>/peer_copies/. Entries
// that are unfinished, temporary or unreadable are skipped (a crash during a
// save or a transfer never makes a step look present). A missing local
// directory holds nothing.
Result<std::vector<Holding>> ListHoldings(const orbax::Location& local);

// Where a holding lives in the local directory of its holder.
orbax::Location HoldingLocation(const orbax::Location& local, const Holding& h);
orbax::Location PeerCopyLocation(const orbax::Location& local, int owner, int64_t step);

std::string EncodeHoldings(const std::vector<Holding>& holdings);
Result<std::vector<Holding>> DecodeHoldings(std::string_view bytes, int holder);

}  // namespace cairn::emergency
