// FileKvStore durability protocol.
//
// Every step works on descriptors: the key's directory is reached from the
// root with openat(O_NOFOLLOW | O_DIRECTORY) per component (safe_path.h), so
// no step follows a symbolic link below the root.
//
// Put(key, value):
//   0. Open the key's directory, creating missing ones (the root and its
//      missing ancestors too). Each directory created has its parent fsynced
//      right after mkdir (the new directory itself is synced by the next
//      creation inside it, or by step 5). Each directory that already existed
//      has its parent fsynced the first time this store writes below it: its
//      creator may have died before syncing it (the root's parent likewise).
//   1. Create a temporary file `.__cairn_tmp_<16 random hex digits>` in that
//      directory with O_EXCL | O_NOFOLLOW, taking a new random name on EEXIST.
//   2. Write the value with large pwrite calls: the 4096-aligned bulk through
//      a second O_DIRECT descriptor when the value is large (staged through an
//      aligned buffer when its bytes are not 4096-aligned), the rest (or
//      everything, when O_DIRECT is refused with EINVAL or does not apply)
//      through the ordinary descriptor.
//   3. fdatasync the temporary file once (this covers both descriptors: it
//      flushes the inode's data), then close both, checking close()'s result.
//   4. renameat() the temporary file over the key (in the same directory
//      descriptor): readers see the old value or the new one, never a part.
//   5. fsync the key's directory so the rename itself is durable.
// Put returns OK only after step 5. A crash before step 4 leaves the old value
// and possibly a temporary file, which List never shows. Any failure after
// step 1 unlinks the temporary file.
//
// PutIfAbsent(key, value): steps 0-3, then linkat() the temporary file to the
// key (fails with EEXIST atomically when the key exists), unlink the temporary
// name, and fsync the directory.
//
// Get(key, range) of a large range that is mostly not in the page cache reads
// it with O_DIRECT, whole 4096-byte blocks around the range into an aligned
// Buffer that then drops the extra head (Buffer::RemovePrefix): no page-cache
// pages are filled and copied out. Cached or small ranges read through the
// page cache, and so does every read once SetReadsShared(true) says other
// processes read the same values (they then share the cache's copy instead
// of each reading the device). O_DIRECT reads see data written by buffered
// writes: the kernel writes dirty pages of the range back first.
//
// Delete(key): unlinkat the key in its directory, then fsync the directory.
// DeletePrefix: see file_list.cc.

#include "cairn/kvstore/file/file_kvstore.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cairn/kvstore/file/posix_io.h"
#include "cairn/util/hex.h"
#include "cairn/util/thread_pool.h"

namespace cairn {
namespace {

using file_internal::kDirectAlign;
using file_internal::PwriteAll;
using file_internal::SyncDir;
using file_internal::UniqueFd;

// Staging buffer for O_DIRECT writes of unaligned caller memory.
constexpr uint64_t kDirectStageBytes = uint64_t{8} << 20;

std::string NormalizeRoot(std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

}  // namespace

Status ValidateFileKey(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("invalid key `" + Printable(key.substr(0, 1024)) + "`: " +
                                std::string(why));
  };
  if (key.back() == '/') return bad("trailing `/`");
  if (key.find("//") != std::string_view::npos) return bad("empty path component");
  if (key.find(FileKvStore::kTempMarker) != std::string_view::npos) {
    return bad("contains the reserved temporary-file marker");
  }
  if (std::count(key.begin(), key.end(), '/') > file_internal::kMaxDirDepth) {
    return bad("more than " + std::to_string(file_internal::kMaxDirDepth) + " directory levels");
  }
  return Status::OK();
}

FileKvStore::FileKvStore(std::string root, FileKvStoreOptions options)
    : root_(NormalizeRoot(std::move(root))), options_(options), dirs_(root_) {
  url_ = "file://" + root_ + (root_ == "/" ? "" : "/");
  options_.write_chunk_bytes =
      std::max<uint64_t>(kDirectAlign, options_.write_chunk_bytes / kDirectAlign * kDirectAlign);
}

Status FileKvStore::CheckKey(std::string_view key) const {
  return ValidateFileKey(key).Annotate(url_);
}

Result<FileKvStore::KeyDir> FileKvStore::OpenKeyDir(std::string_view key, bool create) {
  KeyDir dir;
  const size_t slash = key.rfind('/');
  const std::string_view rel = slash == std::string_view::npos ? "" : key.substr(0, slash);
  dir.name = std::string(slash == std::string_view::npos ? key : key.substr(slash + 1));
  dir.path = dirs_.PathOf(rel);
  CAIRN_ASSIGN_OR_RETURN(dir.fd, dirs_.OpenDir(rel, create));
  return dir;
}

Result<FileKvStore::Temp> FileKvStore::CreateTemp(std::string_view key) {
  Temp temp;
  auto dir = OpenKeyDir(key, /*create=*/true);
  if (!dir.ok()) return dir.status().Annotate("writing " + Describe(key));
  temp.dir = std::move(*dir);
  auto fd = file_internal::CreateTempFile(temp.dir.fd.get(), temp.dir.path, &temp.name);
  if (!fd.ok()) return fd.status().Annotate("writing " + Describe(key));
  temp.fd = std::move(*fd);
  return temp;
}

Result<FileKvStore::Temp> FileKvStore::WriteTemp(std::string_view key, ByteView value) {
  CAIRN_ASSIGN_OR_RETURN(Temp temp, CreateTemp(key));
  const int dirfd = temp.dir.fd.get();
  auto fail = [&](int err, std::string_view what) {
    temp.fd = UniqueFd();
    ::unlinkat(dirfd, temp.name.c_str(), 0);
    return ErrnoError(err, "writing " + Describe(key) + ": " + std::string(what));
  };
  auto fail_status = [&](const Status& st) {
    temp.fd = UniqueFd();
    ::unlinkat(dirfd, temp.name.c_str(), 0);
    return st.Annotate("writing " + Describe(key));
  };

  const uint8_t* data = value.data();
  const uint64_t size = value.size();
  uint64_t done = 0;
  if (options_.use_direct_io && size >= options_.direct_io_min_bytes &&
      !direct_refused_.load(std::memory_order_relaxed)) {
    const uint64_t bulk = size / kDirectAlign * kDirectAlign;
    UniqueFd dfd(::openat(dirfd, temp.name.c_str(), O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC));
    if (dfd.valid()) {
      int err = 0;
      if (reinterpret_cast<uintptr_t>(data) % kDirectAlign == 0) {
        done = PwriteAll(dfd.get(), data, bulk, 0, options_.write_chunk_bytes, &err);
      } else {
        // The caller's bytes are not 4096-aligned (a numpy array usually is
        // not): stage them through an aligned buffer. A memcpy costs far less
        // than the page cache plus fdatasync would.
        Buffer stage(static_cast<size_t>(std::min<uint64_t>(bulk, kDirectStageBytes)));
        while (done < bulk && err == 0) {
          const uint64_t n = std::min<uint64_t>(stage.size(), bulk - done);
          std::memcpy(stage.data(), data + done, static_cast<size_t>(n));
          const uint64_t wrote = PwriteAll(dfd.get(), stage.data(), n, done, n, &err);
          done += wrote;
          if (wrote < n && err == 0) break;  // short aligned write: finish buffered
        }
      }
      // EINVAL: the file system refused this O_DIRECT write; the rest goes
      // through the page cache. A short aligned write is simply continued.
      if (err == EINVAL) direct_refused_.store(true, std::memory_order_relaxed);
      if (err != 0 && err != EINVAL) return fail(err, "direct write");
      if (Status st = dfd.Close("direct write"); !st.ok()) return fail_status(st);
      done = done / kDirectAlign * kDirectAlign;
    } else if (errno == EINVAL) {
      // open() refusing O_DIRECT (older tmpfs, some FUSE and network file
      // systems): everything goes through the buffered descriptor.
      direct_refused_.store(true, std::memory_order_relaxed);
    }
  }
  int err = 0;
  PwriteAll(temp.fd.get(), data + done, size - done, done, options_.write_chunk_bytes, &err);
  if (err != 0) return fail(err, "write");
  if (::fdatasync(temp.fd.get()) != 0) return fail(errno, "fdatasync");
  if (Status st = temp.fd.Close("temporary file"); !st.ok()) return fail_status(st);
  return temp;
}

// Opens `key` for reading: nullopt when it is missing (or a directory), else
// the descriptor and the file's size.
Result<std::optional<std::pair<UniqueFd, uint64_t>>> FileKvStore::OpenForRead(
    std::string_view key) {
  using Opened = std::optional<std::pair<UniqueFd, uint64_t>>;
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  uint64_t size = 0;
  auto fd = dirs_.OpenValue(key, &size);
  if (!fd.ok()) return fd.status().Annotate("reading " + Describe(key));
  if (!fd->valid()) return Opened();
  return Opened(std::make_pair(std::move(*fd), size));
}

// Fills `dst` from `fd` at `offset`.
Status FileKvStore::ReadAll(int fd, std::string_view key, uint64_t offset, MutableByteView dst) {
  uint64_t done = 0;
  while (done < dst.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(options_.write_chunk_bytes,
                                                      dst.size() - done));
    ssize_t r = ::pread(fd, dst.data() + done, n, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "reading " + Describe(key));
    }
    if (r == 0) {
      return DataLossError("reading " + Describe(key) + ": file ended at byte " +
                           std::to_string(offset + done) + ", expected " +
                           std::to_string(offset + dst.size()));
    }
    done += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

Result<std::optional<Buffer>> FileKvStore::ReadDirect(int fd, std::string_view key, uint64_t begin,
                                                      uint64_t end, uint64_t file_size) {
  if (!options_.use_direct_io || reads_shared_.load(std::memory_order_relaxed) ||
      end - begin < options_.direct_read_min_bytes ||
      direct_refused_.load(std::memory_order_relaxed)) {
    return std::optional<Buffer>();
  }
  // Mostly cached (or the kernel cannot tell): copying from the page cache
  // beats reading the device again.
  const int64_t cached = file_internal::CachedPages(fd, begin, end - begin);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (cached < 0 || static_cast<uint64_t>(cached) * page * 2 >= end - begin) {
    return std::optional<Buffer>();
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) return std::optional<Buffer>();
  // Whole aligned blocks around the range; the last one may end past the
  // file's end (the read then stops short there).
  const uint64_t first = begin / kDirectAlign * kDirectAlign;
  const uint64_t last = std::min((end + kDirectAlign - 1) / kDirectAlign * kDirectAlign,
                                 (file_size + kDirectAlign - 1) / kDirectAlign * kDirectAlign);
  CAIRN_ASSIGN_OR_RETURN(Buffer out, Buffer::TryAllocate(static_cast<size_t>(last - first),
                                                         "reading " + Describe(key)));
  uint64_t done = 0;
  while (first + done < end) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(options_.write_chunk_bytes, last - first - done));
    ssize_t r = ::pread(fd, out.data() + done, n, static_cast<off_t>(first + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && done == 0) {
      // The file system takes no O_DIRECT reads: the page cache from now on.
      direct_refused_.store(true, std::memory_order_relaxed);
      ::fcntl(fd, F_SETFL, flags);
      return std::optional<Buffer>();
    }
    if (r < 0) return ErrnoError(errno, "reading " + Describe(key));
    if (r == 0) {
      return DataLossError("reading " + Describe(key) + ": file ended at byte " +
                           std::to_string(first + done) + ", expected " + std::to_string(end));
    }
    done += static_cast<uint64_t>(r);
  }
  out.resize(static_cast<size_t>(end - first));
  out.RemovePrefix(static_cast<size_t>(begin - first));
  return std::optional<Buffer>(std::move(out));
}

Result<std::optional<Buffer>> FileKvStore::Get(std::string_view key, const ByteRange& range) {
  CAIRN_ASSIGN_OR_RETURN(auto opened, OpenForRead(key));
  if (!opened) return std::optional<Buffer>();
  const auto& [fd, size] = *opened;
  auto resolved = ResolveByteRange(range, size);
  if (!resolved.ok()) return resolved.status().Annotate("reading " + Describe(key));
  const auto [begin, end] = *resolved;
  CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> direct, ReadDirect(fd.get(), key, begin, end, size));
  if (direct) return direct;
  Buffer out(static_cast<size_t>(end - begin));
  CAIRN_RETURN_IF_ERROR(ReadAll(fd.get(), key, begin, out.mutable_view()));
  return std::optional<Buffer>(std::move(out));
}

namespace {

// Reads are blocking I/O: more of them in flight than there are cores keeps
// the device's queue full.
ThreadPool& FileReadPool() {
  static ThreadPool* pool = new ThreadPool(8);
  return *pool;
}

}  // namespace

Status FileKvStore::GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) {
  for (const KeyRead& r : reads) CAIRN_RETURN_IF_ERROR(CheckKey(r.key));
  if (reads.size() == 1) return KvStore::GetMany(reads, fn);
  TaskGroup group(FileReadPool());
  for (size_t i = 0; i < reads.size(); ++i) {
    group.Run([this, i, &reads, &fn, &group]() -> Status {
      if (group.failed()) return Status::OK();
      const KeyRead& r = reads[i];
      CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> value, r.max_bytes != 0 && r.range.IsAll()
                                                              ? GetAtMost(r.key, r.max_bytes)
                                                              : Get(r.key, r.range));
      return value ? fn(i, value->view()) : fn(i, std::nullopt);
    });
  }
  return group.Wait();
}

Result<bool> FileKvStore::GetInto(std::string_view key, MutableByteView dst) {
  CAIRN_ASSIGN_OR_RETURN(auto opened, OpenForRead(key));
  if (!opened) return false;
  const auto& [fd, size] = *opened;
  if (size != dst.size()) {
    return DataLossError("reading " + Describe(key) + ": value has " + std::to_string(size) +
                         " bytes, expected " + std::to_string(dst.size()));
  }
  CAIRN_RETURN_IF_ERROR(ReadAll(fd.get(), key, 0, dst));
  return true;
}

Status FileKvStore::Put(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  CAIRN_ASSIGN_OR_RETURN(Temp temp, WriteTemp(key, value));
  const int dirfd = temp.dir.fd.get();
  if (::renameat(dirfd, temp.name.c_str(), dirfd, temp.dir.name.c_str()) != 0) {
    int err = errno;
    ::unlinkat(dirfd, temp.name.c_str(), 0);
    return ErrnoError(err, "writing " + Describe(key) + ": rename");
  }
  return SyncDir(dirfd, temp.dir.path).Annotate("writing " + Describe(key));
}

Result<bool> FileKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  {  // cheap early out
    auto dir = OpenKeyDir(key, /*create=*/false);
    if (!dir.ok()) return dir.status().Annotate("writing " + Describe(key));
    if (dir->fd.valid()) {
      auto kind = file_internal::KindAt(dir->fd.get(), dir->name.c_str());
      if (kind != file_internal::EntryKind::kMissing &&
          kind != file_internal::EntryKind::kDirectory) {
        return false;
      }
    }
  }
  CAIRN_ASSIGN_OR_RETURN(Temp temp, WriteTemp(key, value));
  const int dirfd = temp.dir.fd.get();
  int rc = ::linkat(dirfd, temp.name.c_str(), dirfd, temp.dir.name.c_str(), 0);
  int err = errno;
  ::unlinkat(dirfd, temp.name.c_str(), 0);
  if (rc != 0) {
    if (err == EEXIST) return false;
    return ErrnoError(err, "writing " + Describe(key) + ": link");
  }
  CAIRN_RETURN_IF_ERROR(SyncDir(dirfd, temp.dir.path).Annotate("writing " + Describe(key)));
  return true;
}

Status FileKvStore::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  auto dir = OpenKeyDir(key, /*create=*/false);
  if (!dir.ok()) return dir.status().Annotate("deleting " + Describe(key));
  if (!dir->fd.valid()) return Status::OK();
  if (::unlinkat(dir->fd.get(), dir->name.c_str(), 0) != 0) {
    const int err = errno;
    if (err == ENOENT || err == EISDIR) return Status::OK();  // a directory is no key
    if (err == EPERM && file_internal::KindAt(dir->fd.get(), dir->name.c_str()) ==
                            file_internal::EntryKind::kDirectory) {
      return Status::OK();  // unlink of a directory on some systems
    }
    return ErrnoError(err, "deleting " + Describe(key));
  }
  return SyncDir(dir->fd.get(), dir->path).Annotate("deleting " + Describe(key));
}

}  // namespace cairn
