// What the job's launcher says about the job, read from the environment in
// one place: the Python package and the CLI choose their coordinator here.
//
// Thread safety: reads the environment (do not change it concurrently).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/coordinator.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

// The number of ranks mpirun started: OMPI_COMM_WORLD_SIZE (OpenMPI), else
// PMI_SIZE (MPICH, Intel MPI); a variable that is unset, empty or not a
// positive number is skipped. 1 when neither says.
int MpiWorldSizeFromEnvironment();

// Where a save's coordinator comes from, in this order: the one the caller
// gave; in a job of several processes, the job's runtime's
// (jax.distributed) when it runs exactly these processes, else files
// beside the checkpoint (BeginSharedFileCoordination: needs a barrier and
// a local path); in a job of one process, the one the environment calls
// for (kDetected).
enum class SaveCoordinatorSource { kGiven, kJobRuntime, kSharedFiles, kDetected };
struct SaveCoordinatorFacts {
  bool given = false;     // the caller gave a coordinator
  int process_count = 1;  // as the caller says
  // The job's runtime (jax.distributed) is up with `process_count` processes.
  bool runtime_runs_these_processes = false;
  bool has_barrier = false;     // the caller gave a barrier callable
  std::string checkpoint_path;  // the save's directory (named in errors)
};
// Result: the source. Errors: InvalidArgument naming the checkpoint when
// several processes have neither a coordinator nor a barrier, or share
// only a barrier but save to a URL.
Result<SaveCoordinatorSource> ChooseSaveCoordinator(const SaveCoordinatorFacts& facts);

// Coordination through the checkpoint's file system, for processes that
// share only a barrier: a directory beside the checkpoint
// (`<parent>/.cairn-coordination.<name>`) holds a key-value store of files,
// under a callback coordinator (coordinator.h).
//   1. BeginSharedFileCoordination: process 0 empties and creates the
//      directory; every process meets at the barrier
//      `cairn_save_coordination`; each then has a coordinator over it.
//   2. The save runs its collectives over the files.
//   3. EndSharedFileCoordination: every process meets at the barrier
//      `cairn_save_done`; process 0 removes the directory.
// Every process calls the barrier with the same name; it returns once all
// have. Its error fails the step.
using NamedBarrier = std::function<Status(std::string_view name)>;
struct SharedFileCoordination {
  std::string directory;                     // the coordination directory
  std::unique_ptr<Coordinator> coordinator;  // over its files
};
// Step 1. Errors: InvalidArgument for a URL (a local file system is
// needed), an index outside [0, count), or no barrier; the file system's
// error naming the directory; the barrier's error.
Result<SharedFileCoordination> BeginSharedFileCoordination(const std::string& checkpoint_path,
                                                           int process_index, int process_count,
                                                           const NamedBarrier& barrier);
// Step 3. Errors: the barrier's, or the file system's naming the directory.
Status EndSharedFileCoordination(const std::string& directory, int process_index, const NamedBarrier& barrier);

// The coordinator the environment asks for: under mpirun with more than one
// rank, the MPI coordinator (MPI initialized if needed, collectives giving
// up after `timeout`); otherwise null: the caller runs alone.
// Errors: those of InitializeMpiIfNeeded and NewMpiCoordinator
// (Unimplemented when cairn was built without MPI).
Result<std::unique_ptr<Coordinator>> CoordinatorFromEnvironment(std::chrono::nanoseconds timeout);

}  // namespace cairn
