#include "cairn/util/shared_memory_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cairn {
namespace {

#ifndef MADV_POPULATE_READ
constexpr int MADV_POPULATE_READ = 22;
#endif
#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;
#endif

Status Errno(const std::string& what, const std::string& path) {
  const int e = errno;
  return (e == ENOSPC || e == ENOMEM ? ResourceExhaustedError : InternalError)(
      what + " " + path + ": " + std::strerror(e));
}

}  // namespace

Result<std::unique_ptr<SharedMemoryFile>> SharedMemoryFile::Open(const std::string& path, uint64_t size) {
  if (size == 0) return InvalidArgumentError("shared memory file " + path + ": size 0");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Errno("opening shared memory file", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = Errno("stat of shared memory file", path);
    ::close(fd);
    return s;
  }
  // Every process asks for the same size; one that finds another size is
  // not looking at the same exchange.
  if (st.st_size != 0 && static_cast<uint64_t>(st.st_size) != size) {
    ::close(fd);
    return FailedPreconditionError("shared memory file " + path + " has " + std::to_string(st.st_size) +
                                   " bytes, expected " + std::to_string(size));
  }
  if (st.st_size == 0 && ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    Status s = Errno("sizing shared memory file", path);
    ::close(fd);
    return s;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    Status s = Errno("mapping shared memory file", path);
    ::close(fd);
    return s;
  }
  return std::unique_ptr<SharedMemoryFile>(new SharedMemoryFile(path, fd, static_cast<uint8_t*>(p), size));
}

uint64_t SharedMemoryFile::FreeBytes(const std::string& directory) {
  struct statvfs s;
  if (::statvfs(directory.c_str(), &s) != 0) return 0;
  return static_cast<uint64_t>(s.f_bavail) * static_cast<uint64_t>(s.f_frsize);
}

SharedMemoryFile::~SharedMemoryFile() {
  ::munmap(data_, static_cast<size_t>(size_));
  ::close(fd_);
  Unlink();
}

void SharedMemoryFile::PopulateRead(uint64_t offset, uint64_t n) const {
  Populate(offset, n, MADV_POPULATE_READ);
}

void SharedMemoryFile::PopulateWrite(uint64_t offset, uint64_t n) const {
  Populate(offset, n, MADV_POPULATE_WRITE);
}

void SharedMemoryFile::Populate(uint64_t offset, uint64_t n, int advice) const {
  if (n == 0) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t lo = offset / page * page;
  const uint64_t hi = std::min<uint64_t>((offset + n + page - 1) / page * page, (size_ + page - 1) / page * page);
  if (hi > lo) ::madvise(data_ + lo, static_cast<size_t>(hi - lo), advice);
}

void SharedMemoryFile::Unlink() {
  if (unlinked_) return;
  unlinked_ = true;
  ::unlink(path_.c_str());
}

std::string ThisHostId() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = 0;
  std::string id(name);
  char boot[64] = {};
  const int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, boot, sizeof(boot) - 1);
    ::close(fd);
    if (n > 0) id += "/" + std::string(boot, static_cast<size_t>(n));
  }
  return id;
}

}  // namespace cairn
