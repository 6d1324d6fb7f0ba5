// Test helper: a fresh directory under the system's temporary directory,
// removed with everything in it when the object goes out of scope.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace cairn::testing {

struct TempDir {
  // `name`: the start of the directory's name, for finding leftovers.
  explicit TempDir(const std::string& name) {
    std::string pattern = (std::filesystem::temp_directory_path() / (name + "_XXXXXX")).string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr) << pattern;
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace cairn::testing
