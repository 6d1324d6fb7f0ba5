// crashfs: an LD_PRELOAD shim that injects crashes and storage faults into
// the file operations a process makes below one directory (test-only;
// docs/TESTING.md, "Crash campaign").
//
// Environment (read at load and by crashfs_reload()):
//   CRASHFS_ROOT     absolute directory; only operations below it count.
//                    Unset: the shim passes everything through.
//   CRASHFS_FAULT    "<kind>@<N>": at mutating operation number N (from 1)
//                    kill     SIGKILL before the operation;
//                    torn     the first write from operation N on lands a
//                             random prefix, then SIGKILL;
//                    fail     the operation returns -1 with EIO (writes:
//                             EIO or ENOSPC) and the process goes on;
//                    powerloss  SIGKILL of the process group (when it is a
//                             session of its own) before the operation; the
//                             harness then rebuilds the tree from the shadow.
//                    Unset or empty: count only.
//   CRASHFS_SHADOW   directory (outside the root) for the durable shadow of
//                    the power-loss model (crashfs_model.h).
//   CRASHFS_COUNTER  file of 16 zero bytes shared by the processes of one
//                    run, so their operations are numbered together.
//   CRASHFS_LOG      file the shim appends to: the faulted operation, and
//                    with CRASHFS_TRACE=1 every operation, a line each:
//                    "<n>\t<pid>\t<op>\t<path>\t<path2>" (FAULT lines start
//                    with "FAULT\t<kind>\t").
//   CRASHFS_SEED     seeds the torn prefix and the errno of a failed write.
//
// Mutating operations: open/openat/creat with O_CREAT or O_TRUNC, write,
// pwrite, writev, pwritev(2), ftruncate, truncate, fallocate, fsync,
// fdatasync, rename(at/at2), unlink(at), rmdir, remove, mkdir(at), link(at),
// symlink(at), copy_file_range and sendfile into a file below the root.
// stdio's buffered writes (fwrite) and raw syscall() are not seen.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "crashfs_model.h"
#include "crashfs_shim.h"

namespace crashfs_shim {

enum class Kind { kNone, kKill, kTorn, kFail, kPowerLoss };

struct Config {
  bool active = false;
  std::string root, shadow, log;
  Kind kind = Kind::kNone;
  uint64_t fault_at = 0;
  uint64_t seed = 0;
  bool trace = false;
};

Config g_cfg;
// [0]: the operations numbered so far; [1]: set once the fault fired (torn).
std::atomic<uint64_t> g_local_counter[2];
std::atomic<uint64_t>* g_counter = g_local_counter;

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

void Load() {
  Config c;
  const char* root = Env("CRASHFS_ROOT");
  if (root && root[0] == '/') {
    c.active = true;
    c.root = root;
    while (c.root.size() > 1 && c.root.back() == '/') c.root.pop_back();
  }
  if (const char* v = Env("CRASHFS_SHADOW")) c.shadow = v;
  if (const char* v = Env("CRASHFS_LOG")) c.log = v;
  if (const char* v = Env("CRASHFS_SEED")) c.seed = std::strtoull(v, nullptr, 10);
  c.trace = Env("CRASHFS_TRACE") != nullptr;
  if (const char* f = Env("CRASHFS_FAULT")) {
    const char* at = std::strchr(f, '@');
    const std::string kind(f, at ? static_cast<size_t>(at - f) : std::strlen(f));
    c.fault_at = at ? std::strtoull(at + 1, nullptr, 10) : 0;
    c.kind = kind == "kill" ? Kind::kKill : kind == "torn" ? Kind::kTorn
           : kind == "fail" ? Kind::kFail : kind == "powerloss" ? Kind::kPowerLoss : Kind::kNone;
  }
  g_local_counter[0].store(0);
  g_local_counter[1].store(0);
  g_counter = g_local_counter;
  if (const char* path = Env("CRASHFS_COUNTER")) {
    int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC));
    if (fd >= 0) {
      void* p = mmap(nullptr, 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      syscall(SYS_close, fd);
      if (p != MAP_FAILED) g_counter = static_cast<std::atomic<uint64_t>*>(p);
    }
  }
  g_cfg = c;
}

// After g_cfg's own initialization (same translation unit, in order).
struct Loader {
  Loader() { Load(); }
} g_loader;

bool Below(const std::string& abs) {
  const std::string& r = g_cfg.root;
  return abs.size() >= r.size() && abs.compare(0, r.size(), r) == 0 &&
         (abs.size() == r.size() || abs[r.size()] == '/');
}

std::string FdPath(int fd) {
  char self[64], buf[4096];
  std::snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
  long n = syscall(SYS_readlinkat, AT_FDCWD, self, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The absolute path of `path` relative to `dirfd`, lexically ("" if unknown).
std::string AbsAt(int dirfd, const char* path) {
  if (!path) return "";
  if (path[0] == '/') return path;
  std::string base;
  if (dirfd == AT_FDCWD) {
    char cwd[4096];
    if (!getcwd(cwd, sizeof(cwd))) return "";
    base = cwd;
  } else {
    base = FdPath(dirfd);
  }
  if (base.empty()) return "";
  return path[0] ? base + "/" + path : base;
}

bool FdBelow(int fd, std::string* path) {
  if (!g_cfg.active || fd < 0) return false;
  *path = FdPath(fd);
  return !path->empty() && path->front() == '/' && Below(*path);
}

void Log(const std::string& line) {
  if (g_cfg.log.empty()) return;
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, g_cfg.log.c_str(),
                                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd < 0) return;
  syscall(SYS_write, fd, line.data(), line.size());
  syscall(SYS_close, fd);
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

[[noreturn]] void Die(bool group) {
  // The whole group only when it is a session of its own (the harness starts
  // every run so); never a caller's shell or test runner.
  if (group && getpgrp() == getsid(0)) kill(-getpgrp(), SIGKILL);
  kill(getpid(), SIGKILL);
  for (;;) pause();
}

// What to do with one mutating operation.
enum class Act { kGo, kFail, kTorn };

// Numbers the operation; at the fault's number injects it. `write_len` > 0
// for writes (torn applies to them; otherwise torn acts as kill).
Act Hook(const char* op, const std::string& a, const std::string& b, size_t write_len = 0) {
  const uint64_t n = g_counter->fetch_add(1) + 1;
  char head[64];
  std::snprintf(head, sizeof(head), "%llu\t%ld\t", static_cast<unsigned long long>(n),
                static_cast<long>(getpid()));
  const std::string desc = std::string(head) + op + "\t" + a + "\t" + b + "\n";
  if (g_cfg.trace) Log(desc);
  if (g_cfg.kind == Kind::kNone) return Act::kGo;
  if (g_cfg.kind == Kind::kTorn) {
    // The first write from operation N on is torn (so that a run whose
    // threads order their operations differently still tears a write).
    if (write_len == 0 || n < g_cfg.fault_at || g_counter[1].exchange(1) != 0) return Act::kGo;
  } else if (n != g_cfg.fault_at) {
    return Act::kGo;
  }
  static const char* kNames[] = {"none", "kill", "torn", "fail", "powerloss"};
  Log(std::string("FAULT\t") + kNames[static_cast<int>(g_cfg.kind)] + "\t" + desc);
  switch (g_cfg.kind) {
    case Kind::kFail: return Act::kFail;
    case Kind::kTorn: return Act::kTorn;
    case Kind::kPowerLoss: Die(true);
    default: Die(false);
  }
}

int FailErrno(bool is_write) {
  return is_write && (Mix(g_cfg.seed ^ g_cfg.fault_at) & 1) ? ENOSPC : EIO;
}
size_t TornLength(size_t n) { return static_cast<size_t>(Mix(g_cfg.seed + g_cfg.fault_at) % n); }

// Path-based operations: number them when either path is below the root.
// Returns true when the caller must fail with errno set.
bool PathOp(const char* op, int dirfd1, const char* p1, int dirfd2, const char* p2) {
  if (!g_cfg.active) return false;
  const std::string a = AbsAt(dirfd1, p1), b = p2 ? AbsAt(dirfd2, p2) : std::string();
  if (!(Below(a) || (!b.empty() && Below(b)))) return false;
  if (Hook(op, a, b) == Act::kFail) {
    errno = FailErrno(false);
    return true;
  }
  return false;
}

bool Creates(int flags) { return flags & (O_CREAT | O_TRUNC) || (flags & O_TMPFILE) == O_TMPFILE; }

void AfterSync(int fd) {
  if (g_cfg.shadow.empty()) return;
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) crashfs::RecordDir(g_cfg.shadow, fd);
  else if (S_ISREG(st.st_mode)) crashfs::RecordFile(g_cfg.shadow, fd);
}

// O_SYNC/O_DSYNC descriptors: a write is durable once it returns.
void AfterWrite(int fd, ssize_t rc) {
  if (rc <= 0 || g_cfg.shadow.empty()) return;
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0 && (fl & (O_SYNC | O_DSYNC))) AfterSync(fd);
}

// Torn writes land their prefix with raw system calls (`offset` < 0: at
// the file position), then the process dies.
[[noreturn]] void Torn(int fd, const struct iovec* iov, int n, size_t total, off_t offset) {
  size_t keep = TornLength(total);
  for (int i = 0; i < n && keep > 0; ++i) {
    size_t k = iov[i].iov_len < keep ? iov[i].iov_len : keep;
    if (offset < 0) syscall(SYS_write, fd, iov[i].iov_base, k);
    else syscall(SYS_pwrite64, fd, iov[i].iov_base, k, offset);
    if (offset >= 0) offset += static_cast<off_t>(k);
    keep -= k;
  }
  Die(false);
}

size_t IovTotal(const struct iovec* iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

// Numbers a write of `iov` into `fd`; returns true when it must fail
// (errno set). `*below` says whether the fd is below the root.
bool WriteOp(const char* op, int fd, const struct iovec* iov, int n, off_t offset, bool* below) {
  std::string p;
  const size_t total = IovTotal(iov, n);
  *below = total > 0 && FdBelow(fd, &p);
  if (!*below) return false;
  switch (Hook(op, p, "", total)) {
    case Act::kFail: errno = FailErrno(true); return true;
    case Act::kTorn: Torn(fd, iov, n, total, offset);
    case Act::kGo: break;
  }
  return false;
}

}  // namespace crashfs_shim

using namespace crashfs_shim;

// ---- The interposers. ----
extern "C" {

#define OPEN_BODY(realcall, dirfd)                                            \
  mode_t mode = 0;                                                            \
  if (flags & O_CREAT || (flags & O_TMPFILE) == O_TMPFILE) {                  \
    va_list ap;                                                               \
    va_start(ap, flags);                                                      \
    mode = va_arg(ap, mode_t);                                                \
    va_end(ap);                                                               \
  }                                                                           \
  if (Creates(flags) && PathOp("open", dirfd, path)) return -1;               \
  return realcall;

int open(const char* path, int flags, ...) {
  REAL(open);
  OPEN_BODY(real(path, flags, mode), AT_FDCWD)
}
int open64(const char* path, int flags, ...) {
  REAL(open64);
  OPEN_BODY(real(path, flags, mode), AT_FDCWD)
}
int openat(int dirfd, const char* path, int flags, ...) {
  REAL(openat);
  OPEN_BODY(real(dirfd, path, flags, mode), dirfd)
}
int openat64(int dirfd, const char* path, int flags, ...) {
  REAL(openat64);
  OPEN_BODY(real(dirfd, path, flags, mode), dirfd)
}
int __open_2(const char* path, int flags) {
  REAL(__open_2);
  if (Creates(flags) && PathOp("open", AT_FDCWD, path)) return -1;
  return real(path, flags);
}
int __open64_2(const char* path, int flags) {
  REAL(__open64_2);
  if (Creates(flags) && PathOp("open", AT_FDCWD, path)) return -1;
  return real(path, flags);
}
int __openat_2(int dirfd, const char* path, int flags) {
  REAL(__openat_2);
  if (Creates(flags) && PathOp("open", dirfd, path)) return -1;
  return real(dirfd, path, flags);
}
int __openat64_2(int dirfd, const char* path, int flags) {
  REAL(__openat64_2);
  if (Creates(flags) && PathOp("open", dirfd, path)) return -1;
  return real(dirfd, path, flags);
}
int creat(const char* path, mode_t mode) {
  REAL(creat);
  if (PathOp("open", AT_FDCWD, path)) return -1;
  return real(path, mode);
}
int creat64(const char* path, mode_t mode) {
  REAL(creat64);
  if (PathOp("open", AT_FDCWD, path)) return -1;
  return real(path, mode);
}


#define WRITE1(op, offset, call)                                 \
  struct iovec one = {const_cast<void*>(buf), count};            \
  bool below = false;                                            \
  if (WriteOp(op, fd, &one, 1, offset, &below)) return -1;       \
  ssize_t rc = call;                                             \
  if (below) AfterWrite(fd, rc);                                 \
  return rc;
#define WRITEV(op, offset, call)                                 \
  bool below = false;                                            \
  if (WriteOp(op, fd, iov, n, offset, &below)) return -1;        \
  ssize_t rc = call;                                             \
  if (below) AfterWrite(fd, rc);                                 \
  return rc;

ssize_t write(int fd, const void* buf, size_t count) {
  REAL(write);
  WRITE1("write", -1, real(fd, buf, count))
}
ssize_t pwrite(int fd, const void* buf, size_t count, off_t off) {
  REAL(pwrite);
  WRITE1("pwrite", off, real(fd, buf, count, off))
}
ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t off) {
  REAL(pwrite64);
  WRITE1("pwrite", off, real(fd, buf, count, off))
}
ssize_t writev(int fd, const struct iovec* iov, int n) {
  REAL(writev);
  WRITEV("writev", -1, real(fd, iov, n))
}
ssize_t pwritev(int fd, const struct iovec* iov, int n, off_t off) {
  REAL(pwritev);
  WRITEV("pwritev", off, real(fd, iov, n, off))
}
ssize_t pwritev64(int fd, const struct iovec* iov, int n, off64_t off) {
  REAL(pwritev64);
  WRITEV("pwritev", off, real(fd, iov, n, off))
}
ssize_t pwritev2(int fd, const struct iovec* iov, int n, off_t off, int flags) {
  REAL(pwritev2);
  WRITEV("pwritev", off, real(fd, iov, n, off, flags))
}
ssize_t pwritev64v2(int fd, const struct iovec* iov, int n, off64_t off, int flags) {
  REAL(pwritev64v2);
  WRITEV("pwritev", off, real(fd, iov, n, off, flags))
}

// Other operations on a descriptor below the root.
#define FD_OP(op, fd, call)                                                       \
  {                                                                               \
    std::string p;                                                                \
    if (FdBelow(fd, &p) && Hook(op, p, "") == Act::kFail) {                       \
      errno = FailErrno(false);                                                   \
      return -1;                                                                  \
    }                                                                             \
    return call;                                                                  \
  }

int ftruncate(int fd, off_t len) { REAL(ftruncate); FD_OP("ftruncate", fd, real(fd, len)) }
int ftruncate64(int fd, off64_t len) { REAL(ftruncate64); FD_OP("ftruncate", fd, real(fd, len)) }
int fallocate(int fd, int mode, off_t o, off_t l) { REAL(fallocate); FD_OP("fallocate", fd, real(fd, mode, o, l)) }
int fallocate64(int fd, int mode, off64_t o, off64_t l) {
  REAL(fallocate64);
  FD_OP("fallocate", fd, real(fd, mode, o, l))
}
int posix_fallocate(int fd, off_t o, off_t l) { REAL(posix_fallocate); FD_OP("fallocate", fd, real(fd, o, l)) }
int posix_fallocate64(int fd, off64_t o, off64_t l) {
  REAL(posix_fallocate64);
  FD_OP("fallocate", fd, real(fd, o, l))
}
ssize_t copy_file_range(int in, off64_t* ino, int fd, off64_t* outo, size_t len, unsigned flags) {
  REAL(copy_file_range);
  FD_OP("copy_file_range", fd, real(in, ino, fd, outo, len, flags))
}
ssize_t sendfile(int fd, int in, off_t* o, size_t count) { REAL(sendfile); FD_OP("sendfile", fd, real(fd, in, o, count)) }
ssize_t sendfile64(int fd, int in, off64_t* o, size_t count) {
  REAL(sendfile64);
  FD_OP("sendfile", fd, real(fd, in, o, count))
}

// fsync/fdatasync: after a successful sync, the shadow records the file's
// content or the directory's entries as durable.
#define SYNC_OP(op, call)                                                         \
  std::string p;                                                                  \
  const bool below = FdBelow(fd, &p);                                             \
  if (below && Hook(op, p, "") == Act::kFail) {                                   \
    errno = EIO;                                                                  \
    return -1;                                                                    \
  }                                                                               \
  int rc = call;                                                                  \
  if (below && rc == 0) AfterSync(fd);                                            \
  return rc;
int fsync(int fd) { REAL(fsync); SYNC_OP("fsync", real(fd)) }
int fdatasync(int fd) { REAL(fdatasync); SYNC_OP("fdatasync", real(fd)) }

}  // extern "C"
