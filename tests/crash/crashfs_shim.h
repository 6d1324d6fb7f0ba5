// What the crashfs shim's two files share (crashfs.cc: configuration,
// numbering, fault injection, descriptor operations; crashfs_paths.cc: path
// operations and the harness's entry points). Test-only.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>

#include <atomic>
#include <cstdint>

namespace crashfs_shim {

// Reads the CRASHFS_* environment (at load, and again by crashfs_reload).
void Load();
// [0]: the operations numbered so far; [1]: set once a torn write fired.
extern std::atomic<uint64_t>* g_counter;
// Numbers a path operation when either path lies below the root and injects
// the fault at its number. True when the caller must fail (errno set).
bool PathOp(const char* op, int dirfd1, const char* p1, int dirfd2 = AT_FDCWD, const char* p2 = nullptr);

template <typename F>
F Real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace crashfs_shim

// The libc function an interposer stands in for, as `real`.
#define REAL(name) static auto real = crashfs_shim::Real<decltype(&name)>(#name)
