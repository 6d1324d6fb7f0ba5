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
// Thread safety: the mapping may be written and read from any thread;
// open, unlink and destruction are not concurrent with anything.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cairn/util/result.h"

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

  // Asks the kernel to map the pages of [offset, offset + n) now, in one
  // call, instead of one fault per page (a hint: failures are ignored).
  void PopulateRead(uint64_t offset, uint64_t n) const;
  void PopulateWrite(uint64_t offset, uint64_t n) const;

  // Removes the name (idempotent; the mapping stays valid).
  void Unlink();

 private:
  SharedMemoryFile(std::string path, int fd, uint8_t* data, uint64_t size)
      : path_(std::move(path)), fd_(fd), data_(data), size_(size) {}
  void Populate(uint64_t offset, uint64_t n, int advice) const;
  std::string path_;
  int fd_;
  uint8_t* data_;
  uint64_t size_;
  bool unlinked_ = false;
};

// This host: its name and boot id. Processes that report the same id run
// on one kernel and can share a SharedMemoryFile.
std::string ThisHostId();

}  // namespace cairn
