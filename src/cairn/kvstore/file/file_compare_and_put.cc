// FileKvStore::CompareAndPut: a conditional write that is atomic across
// threads and processes (and with TensorStore's file driver, which locks the
// same file the same way).
//
// Protocol (the lock rule: only the holder of an exclusive lock on
// `<key>.__lock`, while that file still has that name, may rename it over the
// key or unlink it):
//
//  1. Open `<key>.__lock` in the key's directory, creating it (and missing
//     directories) if needed.
//  2. Block until an exclusive open-file-description lock (F_OFD_SETLKW) on
//     the whole file is granted.
//  3. Re-open the lock path and compare device and inode with the locked
//     descriptor: if the previous holder renamed or unlinked the file we
//     locked, the lock is void; close it and go back to step 2 with the newly
//     opened file.
//  4. Read the key's current value and compare it with `expected` (absent
//     when expected is nullopt). On a mismatch: unlink the lock file, close
//     it (releasing the lock) and return false; nothing was written.
//  5. Truncate the lock file, write the new value into it, fdatasync it.
//  6. rename() the lock file over the key: readers see the old or the new
//     value, never a mix. The lock is released on close.
//  7. fsync the key's directory so the rename is durable, then return true.
//
// Any error after step 2 unlinks the lock file before returning it, so a
// failed attempt leaves no `.__lock` file behind (a crash may; the next
// writer reuses it).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/posix_io.h"

namespace cairn {
namespace {

constexpr std::string_view kLockSuffix = ".__lock";

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int OpenLockFile(const std::string& path) {
  return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
}

// Step 2: waits for the exclusive lock. Returns 0 or an errno value.
int LockWholeFile(int fd) {
  struct flock fl;
  std::memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  while (::fcntl(fd, F_OFD_SETLKW, &fl) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

// Step 4: whether the value at `path` equals `expected` (nullopt = absent).
Result<bool> CurrentValueMatches(const std::string& path, std::optional<ByteView> expected,
                                 const std::string& what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return !expected.has_value();
    return ErrnoError(errno, what + ": reading the current value");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(err, what + ": stat of the current value");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return FailedPreconditionError(what + ": the key is not a regular file");
  }
  if (!expected || static_cast<uint64_t>(st.st_size) != expected->size()) {
    ::close(fd);
    return false;
  }
  Buffer current(expected->size());
  uint64_t done = 0;
  while (done < current.size()) {
    ssize_t n = ::pread(fd, current.data() + done, current.size() - done,
                        static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return ErrnoError(err, what + ": reading the current value");
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return current.size() == 0 ||
         std::memcmp(current.data(), expected->data(), current.size()) == 0;
}

}  // namespace

Result<bool> FileKvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                        ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(key).Annotate(url()));
  const std::string what = "compare-and-put of " + Describe(key);
  std::string path = root();
  if (path != "/") path += '/';
  path += key;
  const std::string lock_path = path + std::string(kLockSuffix);

  // Step 1.
  int fd = OpenLockFile(lock_path);
  if (fd < 0 && errno == ENOENT) {
    for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
      CAIRN_RETURN_IF_ERROR(file_internal::MakeDir(path.substr(0, pos)).Annotate(what));
    }
    fd = OpenLockFile(lock_path);
  }
  if (fd < 0) return ErrnoError(errno, what + ": opening " + lock_path);

  // Steps 2 and 3.
  while (true) {
    if (int err = LockWholeFile(fd); err != 0) {
      ::close(fd);
      return ErrnoError(err, what + ": locking " + lock_path);
    }
    int again = OpenLockFile(lock_path);
    if (again < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError(err, what + ": re-opening " + lock_path);
    }
    struct stat a, b;
    if (::fstat(fd, &a) != 0 || ::fstat(again, &b) != 0) {
      int err = errno;
      ::close(fd);
      ::close(again);
      return ErrnoError(err, what + ": stat of " + lock_path);
    }
    if (SameFile(a, b)) {
      ::close(again);
      break;
    }
    ::close(fd);  // the lock we got is on a file that lost its name
    fd = again;
  }
  auto abandon = [&](Status status) {
    ::unlink(lock_path.c_str());
    ::close(fd);
    return status;
  };

  // Step 4.
  Result<bool> matches = CurrentValueMatches(path, expected, what);
  if (!matches.ok()) return abandon(matches.status());
  if (!*matches) {
    abandon(Status::OK()).IgnoreError();
    return false;
  }

  // Step 5.
  if (::ftruncate(fd, 0) != 0) return abandon(ErrnoError(errno, what + ": truncating lock file"));
  int err = 0;
  file_internal::PwriteAll(fd, value.data(), value.size(), 0, uint64_t{64} << 20, &err);
  if (err != 0) return abandon(ErrnoError(err, what + ": writing " + lock_path));
  if (::fdatasync(fd) != 0) return abandon(ErrnoError(errno, what + ": fdatasync"));

  // Step 6.
  if (::rename(lock_path.c_str(), path.c_str()) != 0) {
    return abandon(ErrnoError(errno, what + ": rename"));
  }
  ::close(fd);

  // Step 7.
  CAIRN_RETURN_IF_ERROR(
      file_internal::FsyncDir(std::string(file_internal::DirName(path))).Annotate(what));
  return true;
}

}  // namespace cairn
