// What the job's launcher says about the job, read from the environment in
// one place: the Python package and the CLI choose their coordinator here.
//
// Thread safety: reads the environment (do not change it concurrently).
#pragma once

#include <chrono>
#include <memory>

#include "cairn/coordinator.h"
#include "cairn/result.h"

namespace cairn {

// The number of ranks mpirun started: OMPI_COMM_WORLD_SIZE (OpenMPI), else
// PMI_SIZE (MPICH, Intel MPI); a variable that is unset, empty or not a
// number is skipped. 1 when neither says.
int MpiWorldSizeFromEnvironment();

// The coordinator the environment asks for: under mpirun with more than one
// rank, the MPI coordinator (MPI initialized if needed, collectives giving
// up after `timeout`); otherwise null: the caller runs alone.
// Errors: those of InitializeMpiIfNeeded and NewMpiCoordinator
// (Unimplemented when cairn was built without MPI).
Result<std::unique_ptr<Coordinator>> CoordinatorFromEnvironment(std::chrono::nanoseconds timeout);

}  // namespace cairn
