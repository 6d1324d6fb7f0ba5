// Small POSIX helpers shared by the file driver's sources (file_kvstore.cc,
// file_writer.cc). Not part of the kvstore API.
//
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/status.h"

namespace cairn::file_internal {

// Alignment of O_DIRECT offsets, sizes and memory.
inline constexpr uint64_t kDirectAlign = 4096;

// The directory part of `path` ("." when there is none, "/" for "/x").
std::string_view DirName(std::string_view path);

// Path-based helpers: they follow symbolic links. Code below a store's root
// uses SafeRoot (safe_path.h) instead, which follows none and remembers which
// directories it has made durable.

// fsync of a directory, so entries created or renamed in it are durable.
// Checks close().
Status FsyncDir(const std::string& dir);

// mkdir, then fsync of the parent, also when the directory already existed
// (its creator may have died before syncing the parent). OK if it exists.
Status MakeDir(const std::string& path);

// Writes all of [data, data + size) at file offset `offset` with pwrite calls
// of at most `chunk` bytes. Returns the number of bytes written before an
// error; `err` is 0 on success.
uint64_t PwriteAll(int fd, const uint8_t* data, uint64_t size, uint64_t offset, uint64_t chunk,
                   int* err);

// Pages of `fd`'s file in [offset, offset + length) that are in the page
// cache (cachestat(2), else mincore(2) over a mapping), or -1 when the kernel
// cannot tell.
int64_t CachedPages(int fd, uint64_t offset, uint64_t length);

}  // namespace cairn::file_internal
