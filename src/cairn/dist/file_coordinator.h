// A coordinator for processes that share only a barrier callable and the
// checkpoint's file system (`cairn.save(..., process_index=, process_count=,
// barrier=)`): its key-value store is files in a directory every process
// sees, beside the checkpoint, and its collectives are those of
// NewCallbackCoordinator (coordinator.h) over that store.
//
// One save's coordination:
//   1. BeginSharedFileCoordination: process 0 empties and creates
//      `<parent>/.cairn-coordination.<name>`; every process meets at the
//      barrier `cairn_save_coordination`; each then has a coordinator over
//      the directory.
//   2. The save runs its collectives: a value is written to a temporary
//      file and renamed to the key's file (hex of the key's two XXH64
//      hashes), so a reader sees all of it or nothing; a reader polls
//      (0.5 ms doubling to 20 ms) until the file exists or the collective's
//      deadline passes (Unavailable naming the key and the directory).
//   3. EndSharedFileCoordination: every process meets at the barrier
//      `cairn_save_done` (nobody reads a key any more); process 0 removes
//      the directory.
//
// ChooseSaveCoordinator is the rule for which coordinator a save uses.
//
// Thread safety: the coordinator's collectives as coordinator.h says; the
// other functions are called by one thread of each process.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/coordinator.h"
#include "cairn/result.h"

namespace cairn::dist {

// A coordinator over files in `directory` (which must exist on every
// process; keys are never deleted).
std::unique_ptr<Coordinator> NewFileCoordinator(std::string directory, int process_index, int process_count);

// Every process calls it with the same name; returns once all have.
using NamedBarrier = std::function<Status(std::string_view name)>;

struct SharedFileCoordination {
  std::string directory;  // <parent>/.cairn-coordination.<name>
  std::unique_ptr<Coordinator> coordinator;
};

// The directory a save to `checkpoint_path` coordinates in.
std::string CoordinationDirectoryFor(const std::string& checkpoint_path);

// Steps 1 (above). InvalidArgument for a URL (a local file system is
// needed), an index outside [0, count), or no barrier; the file system's
// error naming the directory; the barrier's error.
Result<SharedFileCoordination> BeginSharedFileCoordination(const std::string& checkpoint_path,
                                                           int process_index, int process_count,
                                                           const NamedBarrier& barrier);

// Step 3. The barrier's error, or the file system's naming the directory.
Status EndSharedFileCoordination(const std::string& directory, int process_index, const NamedBarrier& barrier);

// Where a save's coordinator comes from, in this order: the one the caller
// gave; in a job of several processes, the job's runtime's (jax.distributed)
// when it runs exactly these processes, else files beside the checkpoint
// (which needs a barrier and a local path); in a job of one process, the
// one the environment calls for (jax.distributed, mpirun, or a single one).
enum class CoordinatorSource { kGiven, kJobRuntime, kSharedFiles, kDetected };

struct SaveCoordinatorFacts {
  bool given = false;
  int process_count = 1;  // as the caller says
  // The job's runtime (jax.distributed) is up with `process_count` processes.
  bool runtime_runs_these_processes = false;
  bool has_barrier = false;
  std::string checkpoint_path;
};

// InvalidArgument naming the checkpoint when several processes have neither
// a coordinator nor a barrier, or share only a barrier but save to a URL.
Result<CoordinatorSource> ChooseSaveCoordinator(const SaveCoordinatorFacts& facts);

}  // namespace cairn::dist
