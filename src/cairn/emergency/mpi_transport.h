// A PeerTransport over MPI point-to-point messages, for jobs started by
// mpirun. It works on its own duplicate of MPI_COMM_WORLD (so its messages
// never mix with the program's or a coordinator's) with non-blocking
// MPI_Isend / MPI_Improbe + MPI_Mrecv, polled against the deadline.
//
// Needs MPI_THREAD_MULTIPLE (transfers run on background threads while the
// coordinator runs collectives): FailedPrecondition otherwise. Unimplemented
// when cairn was built without MPI.
//
// A send that times out cannot be cancelled reliably: its request and
// buffer are kept until MPI_Finalize.
#pragma once

#include <memory>

#include "cairn/emergency/transport.h"

namespace cairn::emergency {

// Collective over MPI_COMM_WORLD (every rank calls it, in the same order as
// its other collectives on the world communicator).
Result<std::shared_ptr<PeerTransport>> NewMpiTransport();

}  // namespace cairn::emergency
