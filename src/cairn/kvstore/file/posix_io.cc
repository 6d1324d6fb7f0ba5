#include "cairn/kvstore/file/posix_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace cairn::file_internal {

std::string_view DirName(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opening directory " + dir + " to sync it");
  int rc = ::fsync(fd);
  int err = errno;
  if (::close(fd) != 0 && rc == 0 && errno != EINTR) {
    return ErrnoError(errno, "closing directory " + dir + " after syncing it");
  }
  if (rc != 0) return ErrnoError(err, "syncing directory " + dir);
  return Status::OK();
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError(errno, "creating directory " + path);
  }
  return FsyncDir(std::string(DirName(path)));
}

uint64_t PwriteAll(int fd, const uint8_t* data, uint64_t size, uint64_t offset, uint64_t chunk,
                   int* err) {
  uint64_t done = 0;
  *err = 0;
  while (done < size) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, size - done));
    ssize_t w = ::pwrite(fd, data + done, n, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return done;
    }
    if (w == 0) {
      *err = EIO;
      return done;
    }
    done += static_cast<uint64_t>(w);
  }
  return done;
}

namespace {

// cachestat(2) (Linux 6.5); its number is the same on every architecture.
constexpr long kCachestatSyscall = 451;

struct CachestatRange {
  uint64_t off;
  uint64_t len;
};
struct Cachestat {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};

int64_t CachedPagesByMincore(int fd, uint64_t offset, uint64_t length) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page;
  const uint64_t span = offset + length - begin;
  void* map = ::mmap(nullptr, span, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(begin));
  if (map == MAP_FAILED) return -1;
  std::vector<unsigned char> resident((span + page - 1) / page);
  int64_t cached = -1;
  if (::mincore(map, span, resident.data()) == 0) {
    cached = 0;
    for (unsigned char r : resident) cached += r & 1;
  }
  ::munmap(map, span);
  return cached;
}

}  // namespace

int64_t CachedPages(int fd, uint64_t offset, uint64_t length) {
  if (length == 0) return 0;
  CachestatRange range{offset, length};
  Cachestat stat{};
  if (::syscall(kCachestatSyscall, fd, &range, &stat, 0) == 0) {
    return static_cast<int64_t>(stat.nr_cache);
  }
  return CachedPagesByMincore(fd, offset, length);
}

}  // namespace cairn::file_internal
