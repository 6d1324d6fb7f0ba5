// Test helper for checksums: damages stored bytes the way a bad disk or
// memory does, by flipping one bit inside a known run of bytes (a chunk's
// elements, found by their bytes) in every file below a directory. Used by
// the tests of restores that must refuse damaged chunks
// (engine/restore_mapped_test.cc, emergency/manager_test.cc).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace cairn::testing {

// Flips bit 2 of byte 5 of `needle` (REQUIRES: needle.size() > 5) where it
// first occurs in each regular file below `dir`; returns how many files
// changed (0 when `dir` does not exist).
inline int FlipByteOfEveryCopy(const std::string& dir, const std::string& needle) {
  namespace fs = std::filesystem;
  int changed = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const size_t at = bytes.str().find(needle);
    if (at == std::string::npos) continue;
    in.close();
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at + 5));
    const char flipped = static_cast<char>(needle[5] ^ 0x04);
    f.write(&flipped, 1);
    ++changed;
  }
  return changed;
}

}  // namespace cairn::testing
