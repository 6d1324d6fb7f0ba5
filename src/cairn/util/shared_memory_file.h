// SharedMemoryFile: one file in a memory file system (/dev/shm), mapped
// shared, that several processes of one host open by name to exchange
// bytes without copying them through sockets.
//
// Every process opens the same path with the same size: the first creates
// it (mode 0600), the others find it; each maps it MAP_SHARED, so a byte
// one process writes is seen by all. Unlink() removes the name once every
// process has opened it; the memory is freed when the last mapping goes.
// The destructor unmaps, closes, and unlinks (a missing name is fine).
//
// Owners and the sweep of abandoned files (a process killed before every
// process unlinked the name leaves the file, and its memory, for good):
//   1. A file's name carries its owner: OwnedSharedMemoryName appends
//      `.owner-<pid>-<start ticks>-<machine>` (process_identity.h; <machine>:
//      16 hex digits of a hash of host name, boot id and pid namespace) of
//      the process that names it.
//   2. Before a process opens such a file, RemoveAbandonedSharedMemoryFiles
//      removes the files of the directory with the same stem prefix
//      (e.g. `cairn-restore-`) whose owner is provably gone: same <machine>
//      as this process, and its pid free or held by a process that started
//      at another time.
//   3. A file it cannot attribute (no owner tag, or another <machine>: a
//      container with another pid namespace sharing the directory) is
//      removed only when its last change is older than `unattributed_age`,
//      a bound the caller chooses above the longest time a name can live
//      (for a restore window: until every process of its host passed round
//      0 of restore_host_share.h, bounded by its collective timeout).
//   4. A live owner's file is never removed. Removal is unlink(2): a
//      process that still maps the file keeps its bytes.
//
// Thread safety: the mapping may be written and read from any thread;
// open, unlink and destruction are not concurrent with anything.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/util/process_identity.h"
#include "cairn/result.h"

namespace cairn {

class SharedMemoryFile {
 public:
  // Opens (creating it if needed) `path`, sizes it to `size` bytes and
  // maps it. Errors name the path and the failing call.
  static Result<std::unique_ptr<SharedMemoryFile>> Open(const std::string& path, uint64_t size);

  // Bytes available to unprivileged users in the file system holding
  // `directory`, or 0 where it cannot be asked.
  static uint64_t FreeBytes(const std::string& directory);

  ~SharedMemoryFile();
  SharedMemoryFile(const SharedMemoryFile&) = delete;
  SharedMemoryFile& operator=(const SharedMemoryFile&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // "<device>:<inode>" of the opened file: two openings with equal ids
  // share their bytes (a name removed and created again gives another id).
  const std::string& file_id() const { return file_id_; }

  // Asks the kernel to map the pages of [offset, offset + n) now, in one
  // call, instead of one fault per page (a hint: failures are ignored).
  void PopulateRead(uint64_t offset, uint64_t n) const;
  void PopulateWrite(uint64_t offset, uint64_t n) const;

  // Maps [offset, offset + n) of the file again, privately (copy-on-write:
  // the pages are the file's, shared with every process that maps them,
  // until one writes), read-populated. `offset` must be page-aligned. The
  // mapping is the caller's to unmap (munmap of the address and
  // MappedLength(n)); it stays valid after this object and the file's name
  // are gone. Errors name the path.
  Result<uint8_t*> MapPrivate(uint64_t offset, uint64_t n) const;
  static uint64_t MappedLength(uint64_t n);

  // Removes the name (idempotent; the mapping stays valid).
  void Unlink();

 private:
  SharedMemoryFile(std::string path, std::string file_id, int fd, uint8_t* data, uint64_t size)
      : path_(std::move(path)), file_id_(std::move(file_id)), fd_(fd), data_(data), size_(size) {}
  void Populate(uint64_t offset, uint64_t n, int advice) const;
  std::string path_;
  std::string file_id_;
  int fd_;
  uint8_t* data_;
  uint64_t size_;
  bool unlinked_ = false;
};

// This host: its name and boot id. Processes that report the same id run
// on one kernel and can share a SharedMemoryFile.
std::string ThisHostId();

// Step 1: `<stem>.owner-<pid>-<start ticks>-<machine>` for `owner`.
std::string OwnedSharedMemoryName(std::string_view stem, const ProcessIdentity& owner);

// Steps 2-4: removes the files directly in `directory` whose names start
// with `prefix` and whose owner is gone (or that cannot be attributed and
// did not change for `unattributed_age`). Returns the paths removed.
std::vector<std::string> RemoveAbandonedSharedMemoryFiles(const std::string& directory, std::string_view prefix,
                                                          std::chrono::seconds unattributed_age);

}  // namespace cairn
