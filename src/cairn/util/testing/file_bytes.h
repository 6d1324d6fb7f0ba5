// Test helper: a file's whole contents, read as bytes.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace cairn::testing {

// The bytes of the file at `path`; "" when it cannot be opened (a test
// compares them with what it expects, so a missing file fails there).
inline std::string ReadFileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace cairn::testing
