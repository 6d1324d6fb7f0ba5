// Test helpers for memory mappings: which file /proc/self/maps names for an
// address, and whether a directory lies on a RAM disk (tmpfs, ramfs). Used by
// the tests of mapped reads (kvstore/mapped_read_test.cc) and of restores
// that map chunks (engine/restore_mapped_test.cc).
#pragma once

#include <sys/vfs.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace cairn::testing {

// The path /proc/self/maps gives for the mapping holding `address` ("" if
// none or anonymous). A deleted file shows as "<path> (deleted)".
inline std::string MappedPath(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode;
    std::getline(in, path);
    path.erase(0, path.find_first_not_of(' '));
    const size_t dash = range.find('-');
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (a >= lo && a < hi) return path;
  }
  return "";
}

// Whether `path` lies on tmpfs or ramfs.
inline bool IsRamDisk(const std::string& path) {
  struct statfs f;
  if (::statfs(path.c_str(), &f) != 0) return false;
  return f.f_type == 0x01021994 || static_cast<uint32_t>(f.f_type) == 0x858458f6u;
}

}  // namespace cairn::testing
