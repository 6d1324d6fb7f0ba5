// FileKvStore::OpenPositional (positional_write.h): a value written in place.
//
// Durability protocol:
//   1. OpenPositional opens the key's directory without following links
//      (missing directories are created and synced as for Put), opens or
//      creates the file itself (O_NOFOLLOW; a non-regular file is refused)
//      and cuts it to `keep_bytes` if it is longer.
//   2. WriteAt pwrites through the page cache (the bytes are visible to
//      readers of the key at once; a killed process leaves them in place).
//   3. Sync fdatasyncs the file and fsyncs its directory (once), so the
//      bytes and the entry survive a crash of the machine.
// Nothing is renamed: callers keep the key out of readers' sight until done.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/posix_io.h"

namespace cairn {
namespace {

using file_internal::UniqueFd;

class FilePositional final : public PositionalFile {
 public:
  FilePositional(UniqueFd dir, std::string dir_path, UniqueFd fd, std::string what, uint64_t chunk)
      : dir_(std::move(dir)), dir_path_(std::move(dir_path)), fd_(std::move(fd)), what_(std::move(what)),
        chunk_(chunk) {}

  Status WriteAt(uint64_t offset, ByteView bytes) override {
    int err = 0;
    file_internal::PwriteAll(fd_.get(), bytes.data(), bytes.size(), offset, chunk_, &err);
    if (err != 0) return ErrnoError(err, what_ + " at offset " + std::to_string(offset));
    return Status::OK();
  }

  Status Sync() override {
    if (::fdatasync(fd_.get()) != 0) return ErrnoError(errno, what_ + ": fdatasync");
    if (!dir_synced_) {
      CAIRN_RETURN_IF_ERROR(file_internal::SyncDir(dir_.get(), dir_path_).Annotate(what_));
      dir_synced_ = true;
    }
    return Status::OK();
  }

 private:
  UniqueFd dir_;
  std::string dir_path_;
  UniqueFd fd_;
  std::string what_;
  uint64_t chunk_;
  bool dir_synced_ = false;
};

}  // namespace

Result<std::unique_ptr<PositionalFile>> FileKvStore::OpenPositional(std::string_view key, uint64_t keep_bytes) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  const std::string what = "writing " + Describe(key) + " in place";
  auto dir = OpenKeyDir(key, /*create=*/true);
  if (!dir.ok()) return dir.status().Annotate(what);
  const int fd = ::openat(dir->fd.get(), dir->name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, what);
  UniqueFd file(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, what);
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(what + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > keep_bytes && ::ftruncate(fd, static_cast<off_t>(keep_bytes)) != 0) {
    return ErrnoError(errno, what + ": ftruncate");
  }
  return std::unique_ptr<PositionalFile>(std::make_unique<FilePositional>(
      std::move(dir->fd), dir->path, std::move(file), what, options_.write_chunk_bytes));
}

}  // namespace cairn
