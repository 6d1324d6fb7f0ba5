#include "cairn/util/shared_memory_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "cairn/util/xxhash64.h"

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

constexpr std::string_view kOwnerTag = ".owner-";

// <machine> of step 1: what must match for a pid to be looked up here.
std::string MachineTag(const ProcessIdentity& p) {
  const std::string machine = p.host + "\n" + p.boot_id + "\n" + p.pid_ns;
  const uint64_t h = Xxh64(ByteView(reinterpret_cast<const uint8_t*>(machine.data()), machine.size()));
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

enum class Owner { kLive, kGone, kUnattributed };

// Steps 2-3 for one name.
Owner OwnerOf(std::string_view name) {
  const size_t tag = name.rfind(kOwnerTag);
  if (tag == std::string_view::npos) return Owner::kUnattributed;
  std::string_view rest = name.substr(tag + kOwnerTag.size());
  const size_t a = rest.find('-');
  const size_t b = a == std::string_view::npos ? a : rest.find('-', a + 1);
  uint64_t pid = 0, start = 0;
  if (b == std::string_view::npos || !ParseDecimal(rest.substr(0, a), &pid) ||
      !ParseDecimal(rest.substr(a + 1, b - a - 1), &start)) {
    return Owner::kUnattributed;
  }
  const ProcessIdentity& self = ThisProcess();
  if (self.host.empty() || self.boot_id.empty() || rest.substr(b + 1) != MachineTag(self)) {
    return Owner::kUnattributed;
  }
  // Signal 0 only asks whether the pid exists (EPERM: it does).
  if (pid > 0 && pid <= static_cast<uint64_t>(INT32_MAX) && ::kill(static_cast<pid_t>(pid), 0) != 0 &&
      errno == ESRCH) {
    return Owner::kGone;
  }
  const std::optional<uint64_t> now = ProcessStartTicks(static_cast<int64_t>(pid));
  if (!now.has_value()) return Owner::kLive;  // there, but /proc does not say when it started
  return *now == start ? Owner::kLive : Owner::kGone;
}

}  // namespace

std::string OwnedSharedMemoryName(std::string_view stem, const ProcessIdentity& owner) {
  return std::string(stem) + std::string(kOwnerTag) + std::to_string(owner.pid) + "-" +
         std::to_string(owner.start_ticks) + "-" + MachineTag(owner);
}

std::vector<std::string> RemoveAbandonedSharedMemoryFiles(const std::string& directory, std::string_view prefix,
                                                          std::chrono::seconds unattributed_age) {
  std::vector<std::string> removed;
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return removed;
  const int dfd = ::dirfd(dir);
  const time_t now = std::time(nullptr);
  while (const struct dirent* e = ::readdir(dir)) {
    const std::string_view name(e->d_name);
    if (!name.starts_with(prefix)) continue;
    struct stat st;
    // Regular files only; a link is never followed.
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    const Owner owner = OwnerOf(name);
    if (owner == Owner::kLive) continue;  // step 4
    if (owner == Owner::kUnattributed &&
        now - std::max(st.st_mtime, st.st_ctime) < static_cast<time_t>(unattributed_age.count())) {
      continue;  // step 3
    }
    if (::unlinkat(dfd, e->d_name, 0) == 0) removed.push_back(directory + "/" + std::string(name));
  }
  ::closedir(dir);
  return removed;
}

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
  const std::string id = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  return std::unique_ptr<SharedMemoryFile>(new SharedMemoryFile(path, id, fd, static_cast<uint8_t*>(p), size));
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

uint64_t SharedMemoryFile::MappedLength(uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

Result<uint8_t*> SharedMemoryFile::MapPrivate(uint64_t offset, uint64_t n) const {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (n == 0 || offset % page != 0 || offset > size_ || n > size_ - offset) {
    return InvalidArgumentError("mapping bytes [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                                ") of shared memory file " + path_ + " (" + std::to_string(size_) +
                                " bytes): not a page-aligned range inside it");
  }
  const size_t length = static_cast<size_t>(MappedLength(n));
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return Errno("mapping part of shared memory file", path_);
  ::madvise(p, length, MADV_POPULATE_READ);  // a hint, as Populate
  return static_cast<uint8_t*>(p);
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
