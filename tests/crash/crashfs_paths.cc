// crashfs's interposers of path operations and the harness's entry points
// (ctypes); the rest of the shim is in crashfs.cc. Test-only.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "crashfs_model.h"
#include "crashfs_shim.h"

using crashfs_shim::PathOp;

extern "C" {

// Path operations.
int truncate(const char* path, off_t len) {
  REAL(truncate);
  return PathOp("truncate", AT_FDCWD, path) ? -1 : real(path, len);
}
int truncate64(const char* path, off64_t len) {
  REAL(truncate64);
  return PathOp("truncate", AT_FDCWD, path) ? -1 : real(path, len);
}
int rename(const char* a, const char* b) {
  REAL(rename);
  return PathOp("rename", AT_FDCWD, a, AT_FDCWD, b) ? -1 : real(a, b);
}
int renameat(int da, const char* a, int db, const char* b) {
  REAL(renameat);
  return PathOp("rename", da, a, db, b) ? -1 : real(da, a, db, b);
}
int renameat2(int da, const char* a, int db, const char* b, unsigned flags) {
  REAL(renameat2);
  return PathOp("rename", da, a, db, b) ? -1 : real(da, a, db, b, flags);
}
int unlink(const char* path) {
  REAL(unlink);
  return PathOp("unlink", AT_FDCWD, path) ? -1 : real(path);
}
int unlinkat(int dirfd, const char* path, int flags) {
  REAL(unlinkat);
  return PathOp(flags & AT_REMOVEDIR ? "rmdir" : "unlink", dirfd, path) ? -1 : real(dirfd, path, flags);
}
int rmdir(const char* path) {
  REAL(rmdir);
  return PathOp("rmdir", AT_FDCWD, path) ? -1 : real(path);
}
int remove(const char* path) {
  REAL(remove);
  return PathOp("unlink", AT_FDCWD, path) ? -1 : real(path);
}
int mkdir(const char* path, mode_t mode) {
  REAL(mkdir);
  return PathOp("mkdir", AT_FDCWD, path) ? -1 : real(path, mode);
}
int mkdirat(int dirfd, const char* path, mode_t mode) {
  REAL(mkdirat);
  return PathOp("mkdir", dirfd, path) ? -1 : real(dirfd, path, mode);
}
int link(const char* a, const char* b) {
  REAL(link);
  return PathOp("link", AT_FDCWD, a, AT_FDCWD, b) ? -1 : real(a, b);
}
int linkat(int da, const char* a, int db, const char* b, int flags) {
  REAL(linkat);
  return PathOp("link", da, a, db, b) ? -1 : real(da, a, db, b, flags);
}
int symlink(const char* target, const char* path) {
  REAL(symlink);
  return PathOp("symlink", AT_FDCWD, path) ? -1 : real(target, path);
}
int symlinkat(const char* target, int dirfd, const char* path) {
  REAL(symlinkat);
  return PathOp("symlink", dirfd, path) ? -1 : real(target, dirfd, path);
}

// ---- The harness's entry points (ctypes). ----

// Reads the environment again (a forked worker configures its run).
void crashfs_reload(void) { crashfs_shim::Load(); }
// The operations numbered so far (by every process sharing the counter).
unsigned long long crashfs_ops(void) { return crashfs_shim::g_counter->load(); }
// Records the tree below `root` as durable (a run's start state).
int crashfs_snapshot_tree(const char* shadow, const char* root) {
  return crashfs::SnapshotTree(shadow, root);
}
// Builds at `dest` what a power loss leaves; 0 or -errno (`error` filled).
int crashfs_rebuild(const char* shadow, const char* dest, char* error, size_t error_len) {
  std::string why;
  int rc = crashfs::Rebuild(shadow, dest, &why);
  if (error && error_len) std::snprintf(error, error_len, "%s", why.c_str());
  return rc;
}

}  // extern "C"
