// Test helpers: fresh directories under the system's temporary directory,
// removed with everything in them when the object goes out of scope
// (TempDir), or when the test process ends (TestDir).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

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

// "<temp>/<prefix>_<pid>_<name>", made afresh (emptied if it was there),
// and removed with everything in it when the process that made it exits
// normally, whatever the tests' outcome. A forked child that exits does not
// remove its parent's directories; a crash leaves them for inspection.
inline std::string TestDir(const std::string& prefix, const std::string& name) {
  struct Registry {
    std::mutex mu;
    std::vector<std::string> dirs;
    const pid_t owner = ::getpid();
    ~Registry() {
      if (::getpid() != owner) return;
      for (const std::string& d : dirs) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      }
    }
  };
  static Registry registry;
  const std::string dir =
      (std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()) + "_" + name)).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.dirs.push_back(dir);
  return dir;
}

}  // namespace cairn::testing
