// FileKvStore::MapRange (mapped_read.h): a range of a file on a RAM disk
// handed out as a private mapping of the file's own pages.
//
// Only for files on tmpfs or ramfs (fstatfs of the opened file): there the
// pages are memory already, and mapping them privately costs minor faults
// only. On a device a mapping would read the bytes later, page by page,
// inside whatever touches them first, so there the caller reads instead.
//
// The mapping is PROT_READ | PROT_WRITE, MAP_PRIVATE, and populated with
// MADV_POPULATE_READ: every page table entry points at the file's page,
// read-only, so nothing is copied until the holder writes a page (then that
// page alone is copied). MAP_POPULATE would prefault a writable private
// mapping for writing, a copy of every page. Kernels without
// MADV_POPULATE_READ (before 5.14) get one read per page instead.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>

#include "cairn/kvstore/file/file_kvstore.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace cairn {
namespace {

constexpr long kTmpfsMagic = 0x01021994;
constexpr long kRamfsMagic = static_cast<long>(0x858458f6);

bool OnRamDisk(int fd) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return false;
  const long type = static_cast<long>(fs.f_type);
  return type == kTmpfsMagic || type == kRamfsMagic;
}

// Reads one byte of every page, so each is mapped (read-only) now.
void TouchPages(const uint8_t* p, size_t n, size_t page) {
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < n; i += page) sink = sink + p[i];
  (void)sink;
}

}  // namespace

Result<std::shared_ptr<MappedBytes>> FileKvStore::MapRange(std::string_view key, uint64_t offset,
                                                           uint64_t length) {
  CAIRN_ASSIGN_OR_RETURN(auto opened, OpenForRead(key));
  if (!opened) return NotFoundError("mapping " + Describe(key) + ": no such key");
  const auto& [fd, size] = *opened;
  if (offset > size || length > size - offset) {
    return InvalidArgumentError("mapping " + Describe(key) + ": bytes [" + std::to_string(offset) + ", +" +
                                std::to_string(length) + ") lie outside the value of " +
                                std::to_string(size) + " bytes");
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (length == 0 || offset % page != 0 || !OnRamDisk(fd.get())) return std::shared_ptr<MappedBytes>();
  void* p = ::mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(),
                   static_cast<off_t>(offset));
  if (p == MAP_FAILED) return ErrnoError(errno, "mapping " + Describe(key));
  auto mapped = std::make_shared<MappedBytes>(p, static_cast<size_t>(length), static_cast<uint8_t*>(p),
                                              static_cast<size_t>(length), size);
  if (::madvise(p, static_cast<size_t>(length), MADV_POPULATE_READ) != 0) {
    TouchPages(static_cast<const uint8_t*>(p), static_cast<size_t>(length), static_cast<size_t>(page));
  }
  return mapped;
}

}  // namespace cairn
