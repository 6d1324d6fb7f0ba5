// include/cairn/environment.h: the one reader of the launcher's variables
// (dist/mpi_environment.h) and the coordinator choices (dist/).
#include "cairn/environment.h"

#include "cairn/dist/file_coordinator.h"
#include "cairn/dist/mpi_environment.h"
#include "cairn/mpi_coordinator.h"

namespace cairn {

int MpiWorldSizeFromEnvironment() { return dist::MpiWorldSizeFromEnv(); }

Result<std::unique_ptr<Coordinator>> CoordinatorFromEnvironment(std::chrono::nanoseconds timeout) {
  if (MpiWorldSizeFromEnvironment() <= 1) return std::unique_ptr<Coordinator>();
  CAIRN_RETURN_IF_ERROR(InitializeMpiIfNeeded());
  return NewMpiCoordinator(timeout);
}

Result<SaveCoordinatorSource> ChooseSaveCoordinator(const SaveCoordinatorFacts& facts) {
  dist::SaveCoordinatorFacts f;
  f.given = facts.given;
  f.process_count = facts.process_count;
  f.runtime_runs_these_processes = facts.runtime_runs_these_processes;
  f.has_barrier = facts.has_barrier;
  f.checkpoint_path = facts.checkpoint_path;
  CAIRN_ASSIGN_OR_RETURN(dist::CoordinatorSource source, dist::ChooseSaveCoordinator(f));
  switch (source) {
    case dist::CoordinatorSource::kGiven: return SaveCoordinatorSource::kGiven;
    case dist::CoordinatorSource::kJobRuntime: return SaveCoordinatorSource::kJobRuntime;
    case dist::CoordinatorSource::kSharedFiles: return SaveCoordinatorSource::kSharedFiles;
    case dist::CoordinatorSource::kDetected: break;
  }
  return SaveCoordinatorSource::kDetected;
}

Result<SharedFileCoordination> BeginSharedFileCoordination(const std::string& checkpoint_path,
                                                           int process_index, int process_count,
                                                           const NamedBarrier& barrier) {
  CAIRN_ASSIGN_OR_RETURN(dist::SharedFileCoordination c,
                         dist::BeginSharedFileCoordination(checkpoint_path, process_index, process_count, barrier));
  return SharedFileCoordination{std::move(c.directory), std::move(c.coordinator)};
}

Status EndSharedFileCoordination(const std::string& directory, int process_index, const NamedBarrier& barrier) {
  return dist::EndSharedFileCoordination(directory, process_index, barrier);
}

}  // namespace cairn
