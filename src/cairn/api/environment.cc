// include/cairn/environment.h: the one reader of the launcher's variables.
#include "cairn/environment.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "cairn/mpi_coordinator.h"

namespace cairn {

int MpiWorldSizeFromEnvironment() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    int size = 0;
    const char* end = value + std::strlen(value);
    auto [used, ec] = std::from_chars(value, end, size);
    if (ec == std::errc() && used == end) return size;
  }
  return 1;
}

Result<std::unique_ptr<Coordinator>> CoordinatorFromEnvironment(std::chrono::nanoseconds timeout) {
  if (MpiWorldSizeFromEnvironment() <= 1) return std::unique_ptr<Coordinator>();
  CAIRN_RETURN_IF_ERROR(InitializeMpiIfNeeded());
  return NewMpiCoordinator(timeout);
}

}  // namespace cairn
