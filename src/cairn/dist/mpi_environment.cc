#include "cairn/dist/mpi_environment.h"

#include <cctype>
#include <cstdlib>
#include <initializer_list>

namespace cairn::dist {

int MpiWorldSizeFromEnv() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    long n = std::strtol(value, &end, 10);  // skips leading blanks
    const char* digits_end = end;
    while (std::isspace(static_cast<unsigned char>(*end))) ++end;
    if (digits_end != value && *end == '\0' && n >= 1) return static_cast<int>(n);
  }
  return 1;
}

}  // namespace cairn::dist
