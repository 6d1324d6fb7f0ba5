// Whether the process was started by mpirun, read from the launcher's
// environment (Open MPI's OMPI_COMM_WORLD_SIZE, else the PMI_SIZE of MPICH
// and Slurm's PMI), without initializing MPI. The one reader of these
// variables: the coordinator and transport choices ask it.
//
// Thread safety: reads the environment (not safe against concurrent setenv).
#pragma once

namespace cairn::dist {

// The world size the launcher announces; 1 outside mpirun or when the
// variables are not a positive number.
int MpiWorldSizeFromEnv();

}  // namespace cairn::dist
