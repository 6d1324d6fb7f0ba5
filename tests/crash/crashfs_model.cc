// crashfs's power-loss model: recording the durable shadow and rebuilding
// the tree a power loss leaves (crashfs_model.h). Raw system calls only.
#include "crashfs_model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/stat.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

namespace crashfs {
namespace {

long Sys(long rc) { return rc < 0 ? -errno : rc; }
int Open(int dirfd, const char* path, int flags, int mode = 0) {
  return static_cast<int>(Sys(syscall(SYS_openat, dirfd, path, flags | O_CLOEXEC, mode)));
}
void Close(int fd) { syscall(SYS_close, fd); }

int WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    long w = syscall(SYS_write, fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

int ReadAll(int fd, std::string* out) {
  char buf[65536];
  for (off_t off = 0;;) {
    long r = syscall(SYS_pread64, fd, buf, sizeof(buf), off);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r == 0) return 0;
    out->append(buf, static_cast<size_t>(r));
    off += r;
  }
}

int ReadPath(const std::string& path, std::string* out) {
  int fd = Open(AT_FDCWD, path.c_str(), O_RDONLY);
  if (fd < 0) return fd;
  int rc = ReadAll(fd, out);
  Close(fd);
  return rc;
}

// Writes `path` atomically: a temporary file renamed over it.
int WriteAtomic(const std::string& path, const std::string& data) {
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), ".tmp.%ld.%ld", static_cast<long>(syscall(SYS_getpid)),
                static_cast<long>(syscall(SYS_gettid)));
  const std::string tmp = path + suffix;
  int fd = Open(AT_FDCWD, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return fd;
  int rc = WriteAll(fd, data.data(), data.size());
  Close(fd);
  if (rc == 0) rc = static_cast<int>(Sys(syscall(SYS_renameat, AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str())));
  if (rc != 0) syscall(SYS_unlinkat, AT_FDCWD, tmp.c_str(), 0);
  return rc;
}

int EnsureDirs(const std::string& shadow) {
  for (const char* sub : {"", "/files", "/dirs", "/links"}) {
    const std::string p = shadow + sub;
    if (syscall(SYS_mkdirat, AT_FDCWD, p.c_str(), 0755) != 0 && errno != EEXIST) return -errno;
  }
  return 0;
}

char TypeOf(unsigned mode) {
  if (S_ISDIR(mode)) return 'd';
  if (S_ISREG(mode)) return 'f';
  if (S_ISLNK(mode)) return 'l';
  return 0;  // fifos, sockets, devices: not part of a checkpoint
}

bool Statx(int dirfd, const char* name, struct statx* sx) {
  const int flags = AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  return syscall(SYS_statx, dirfd, name, flags, STATX_TYPE | STATX_INO | STATX_BTIME, sx) == 0;
}

std::string KeyOfStatx(const struct statx& sx) {
  char key[96];
  std::snprintf(key, sizeof(key), "%x.%x-%llx-%llx.%x", sx.stx_dev_major, sx.stx_dev_minor,
                static_cast<unsigned long long>(sx.stx_ino),
                static_cast<unsigned long long>(sx.stx_btime.tv_sec), sx.stx_btime.tv_nsec);
  return key;
}

struct Entry {
  char type;
  std::string key;
  std::string name;
};

// The entries of directory `fd` (its own descriptor is not consumed).
int ListDir(int fd, std::vector<Entry>* out) {
  int dfd = Open(fd, ".", O_RDONLY | O_DIRECTORY);
  if (dfd < 0) return dfd;
  alignas(8) char buf[32768];
  int rc = 0;
  for (;;) {
    long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
    if (n < 0) {
      rc = -errno;
      break;
    }
    if (n == 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (!std::strcmp(d->d_name, ".") || !std::strcmp(d->d_name, "..")) continue;
      if (std::strchr(d->d_name, '\n')) continue;  // cannot be recorded a line each
      struct statx sx {};
      if (!Statx(dfd, d->d_name, &sx)) continue;  // removed meanwhile
      const char t = TypeOf(sx.stx_mode);
      if (t) out->push_back({t, KeyOfStatx(sx), d->d_name});
    }
  }
  Close(dfd);
  return rc;
}

int RecordLink(const std::string& shadow, int dirfd, const Entry& e) {
  char target[4096];
  long n = syscall(SYS_readlinkat, dirfd, e.name.c_str(), target, sizeof(target));
  if (n < 0) return -errno;
  return WriteAtomic(shadow + "/links/" + e.key, std::string(target, static_cast<size_t>(n)));
}

int RecordDirEntries(const std::string& shadow, int fd, std::vector<Entry>* entries) {
  const std::string key = KeyOf(fd, "");
  if (key.empty()) return -EBADF;
  int rc = ListDir(fd, entries);
  if (rc != 0) return rc;
  std::string text;
  for (const Entry& e : *entries) {
    text += e.type;
    text += ' ' + e.key + ' ' + e.name + '\n';
    if (e.type == 'l' && (rc = RecordLink(shadow, fd, e)) != 0) return rc;
  }
  return WriteAtomic(shadow + "/dirs/" + key, text);
}

int SnapshotDir(const std::string& shadow, int fd, int depth) {
  if (depth > 64) return -ELOOP;
  std::vector<Entry> entries;
  int rc = RecordDirEntries(shadow, fd, &entries);
  for (const Entry& e : entries) {
    if (rc != 0) break;
    if (e.type == 'l') continue;
    int child = Open(fd, e.name.c_str(), O_RDONLY | O_NOFOLLOW | (e.type == 'd' ? O_DIRECTORY : 0));
    if (child < 0) return child;
    rc = e.type == 'd' ? SnapshotDir(shadow, child, depth + 1) : RecordFile(shadow, child);
    Close(child);
  }
  return rc;
}

int ParseDir(const std::string& text, std::vector<Entry>* out) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) return -EINVAL;
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t sp1 = line.find(' '), sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 != 1 || sp2 == std::string::npos) return -EINVAL;
    out->push_back({line[0], line.substr(2, sp2 - 2), line.substr(sp2 + 1)});
  }
  return 0;
}

int BuildDir(const std::string& shadow, const std::string& key, const std::string& dest,
             std::set<std::string>* on_path, std::string* error) {
  if (syscall(SYS_mkdirat, AT_FDCWD, dest.c_str(), 0755) != 0) {
    *error = "mkdir " + dest + ": " + std::strerror(errno);
    return -errno;
  }
  std::string text;
  if (ReadPath(shadow + "/dirs/" + key, &text) != 0) return 0;  // never synced: empty
  std::vector<Entry> entries;
  if (ParseDir(text, &entries) != 0) {
    *error = "corrupt directory record " + key;
    return -EINVAL;
  }
  for (const Entry& e : entries) {
    const std::string path = dest + "/" + e.name;
    int rc = 0;
    if (e.type == 'd') {
      if (!on_path->insert(e.key).second) continue;  // a cycle of renamed directories
      rc = BuildDir(shadow, e.key, path, on_path, error);
      on_path->erase(e.key);
    } else if (e.type == 'l') {
      std::string target;
      rc = ReadPath(shadow + "/links/" + e.key, &target);
      if (rc == 0) rc = static_cast<int>(Sys(syscall(SYS_symlinkat, target.c_str(), AT_FDCWD, path.c_str())));
      if (rc != 0) *error = "symlink " + path + ": " + std::strerror(-rc);
    } else {
      std::string content;  // empty when the file was never synced
      ReadPath(shadow + "/files/" + e.key, &content);
      int fd = Open(AT_FDCWD, path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
      rc = fd < 0 ? fd : WriteAll(fd, content.data(), content.size());
      if (fd >= 0) Close(fd);
      if (rc != 0) *error = "write " + path + ": " + std::strerror(-rc);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace

std::string KeyOf(int dirfd, const char* name) {
  struct statx sx {};
  if (!Statx(dirfd, name, &sx)) return "";
  return KeyOfStatx(sx);
}

int RecordFile(const std::string& shadow, int fd) {
  int rc = EnsureDirs(shadow);
  if (rc != 0) return rc;
  const std::string key = KeyOf(fd, "");
  if (key.empty()) return -EBADF;
  // Reopened for reading: `fd` may be write-only.
  char self[64];
  std::snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
  int rfd = Open(AT_FDCWD, self, O_RDONLY);
  if (rfd < 0) return rfd;
  std::string content;
  rc = ReadAll(rfd, &content);
  Close(rfd);
  return rc != 0 ? rc : WriteAtomic(shadow + "/files/" + key, content);
}

int RecordDir(const std::string& shadow, int fd) {
  int rc = EnsureDirs(shadow);
  if (rc != 0) return rc;
  std::vector<Entry> entries;
  return RecordDirEntries(shadow, fd, &entries);
}

int SnapshotTree(const std::string& shadow, const std::string& root) {
  int rc = EnsureDirs(shadow);
  if (rc != 0) return rc;
  int fd = Open(AT_FDCWD, root.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return fd;
  rc = SnapshotDir(shadow, fd, 0);
  const std::string key = KeyOf(fd, "");
  Close(fd);
  return rc != 0 ? rc : WriteAtomic(shadow + "/root", key);
}

int Rebuild(const std::string& shadow, const std::string& dest, std::string* error) {
  std::string key;
  if (ReadPath(shadow + "/root", &key) != 0 || key.empty()) {
    *error = "no root recorded in " + shadow + " (SnapshotTree first)";
    return -ENOENT;
  }
  std::set<std::string> on_path{key};
  return BuildDir(shadow, key, dest, &on_path, error);
}

}  // namespace crashfs
