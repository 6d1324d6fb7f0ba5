// The MPI coordinator: for programs launched by `mpirun` (OpenMPI, MPICH).
//
// Available when cairn was built with MPI (CMake found it; see
// docs/COORDINATORS.md); otherwise both functions return Unimplemented. This
// header does not include <mpi.h>.
//
// How it works: the coordinator runs its collectives on its own duplicate of
// MPI_COMM_WORLD, as non-blocking MPI operations (MPI_Iallgather,
// MPI_Iallgatherv, MPI_Ibcast) that it polls with MPI_Test until they
// complete or the deadline passes. Every collective first all-gathers a hash
// of its name (and root), so that processes that call different collectives
// get FailedPrecondition instead of exchanging the wrong messages.
//
// Timeouts: a collective that misses its deadline returns Unavailable. MPI
// cannot cancel a started collective, so the coordinator is then broken:
// later collectives return FailedPrecondition naming the one that timed out
// (likewise after an MPI error inside a collective).
// The job should end (MPI_Abort, or an exception that makes mpirun stop it).
//
// Concurrency: MPI requires every process to start collectives on a
// communicator in the same order, so this coordinator runs one collective at
// a time per process (a mutex); concurrent collectives from different threads
// are not allowed (they time out if the processes order them differently).
#pragma once

#include <chrono>
#include <memory>

#include "cairn/coordinator.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

// Calls MPI_Init_thread (asking for MPI_THREAD_MULTIPLE) unless MPI is
// already initialized, and then arranges for MPI_Finalize at exit. Fails with
// FailedPrecondition if MPI was finalized or provides less than
// MPI_THREAD_SERIALIZED (cairn calls collectives from its own threads).
Status InitializeMpiIfNeeded();

// Initializes MPI if needed, then duplicates MPI_COMM_WORLD (a collective:
// every process must call this, within `timeout` of each other).
Result<std::unique_ptr<Coordinator>> NewMpiCoordinator(
    Coordinator::Duration timeout = std::chrono::seconds(60));

// True if this build of cairn has the MPI coordinator.
bool MpiCoordinatorAvailable();

}  // namespace cairn
