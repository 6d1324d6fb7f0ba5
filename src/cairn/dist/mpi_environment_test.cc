// MpiWorldSizeFromEnv (mpi_environment.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "cairn/dist/mpi_environment.h"

namespace cairn::dist {
namespace {

TEST(MpiEnvironment, WorldSizeFromTheLaunchersVariables) {
  // Under mpirun the launcher's values are put back afterwards.
  const char* ompi = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* pmi = std::getenv("PMI_SIZE");
  const std::optional<std::string> saved_ompi = ompi ? std::optional<std::string>(ompi) : std::nullopt;
  const std::optional<std::string> saved_pmi = pmi ? std::optional<std::string>(pmi) : std::nullopt;
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  EXPECT_EQ(MpiWorldSizeFromEnv(), 1);
  setenv("PMI_SIZE", "6", 1);
  EXPECT_EQ(MpiWorldSizeFromEnv(), 6);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  EXPECT_EQ(MpiWorldSizeFromEnv(), 3);
  setenv("OMPI_COMM_WORLD_SIZE", " 4\n", 1);  // blanks around the number, as Python's int() takes them
  EXPECT_EQ(MpiWorldSizeFromEnv(), 4);
  setenv("OMPI_COMM_WORLD_SIZE", "x", 1);
  EXPECT_EQ(MpiWorldSizeFromEnv(), 6);
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  if (saved_ompi) setenv("OMPI_COMM_WORLD_SIZE", saved_ompi->c_str(), 1);
  if (saved_pmi) setenv("PMI_SIZE", saved_pmi->c_str(), 1);
}

}  // namespace
}  // namespace cairn::dist
