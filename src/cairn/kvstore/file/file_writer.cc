// FileKvStore::OpenWriter: a value streamed into a temporary file.
//
// Durability protocol (the same as Put's, file_kvstore.cc, with step 2 spread
// over the Append calls):
//   1. OpenWriter opens the key's directory without following links (step 0
//      of Put: missing directories are created, their parents and those of
//      existing ones synced) and creates the temporary file
//      `.__cairn_tmp_<16 random hex digits>` in it (O_EXCL | O_NOFOLLOW, a
//      new random name on EEXIST).
//   2. Append writes the bytes at the end of the temporary file: a 4096-aligned
//      bulk whose memory is 4096-aligned goes straight from the caller's bytes
//      through an O_DIRECT descriptor (no copy); other bytes are gathered in
//      an aligned staging buffer of kStagingBytes, written when it fills. The
//      file offset stays a multiple of 4096 until Commit writes the tail.
//   3. Commit writes the staged tail, fdatasyncs the file once, closes both
//      descriptors (checking close()),
//   4. renameat()s it over the key in the directory's descriptor, and
//   5. fsyncs the key's directory. Commit returns OK only after step 5.
// A writer destroyed before Commit succeeds closes and unlinks its temporary
// file; a crash leaves a temporary file that List never shows.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/posix_io.h"

namespace cairn {

using file_internal::kDirectAlign;
using file_internal::PwriteAll;
using file_internal::SyncDir;
using file_internal::UniqueFd;

class FileKvWriter : public KvWriter {
 public:
  static constexpr uint64_t kStagingBytes = uint64_t{8} << 20;

  FileKvWriter(FileKvStore* store, std::string key, FileKvStore::Temp temp)
      : store_(store), key_(std::move(key)), temp_(std::move(temp)), fd_(temp_.fd.release()) {
    staging_.reserve(kStagingBytes);
  }
  ~FileKvWriter() override {
    CloseFds();
    if (!committed_) ::unlinkat(temp_.dir.fd.get(), temp_.name.c_str(), 0);
  }

  Status Append(ByteView bytes) override {
    if (!failed_.ok()) return failed_;
    Status st = AppendBytes(bytes);
    // After a failed write the file's end is unknown: every later Append
    // and the Commit fail with the same error.
    if (!st.ok()) failed_ = st;
    return st;
  }

  Status AppendBytes(ByteView bytes) {
    if (committed_ || fd_ < 0) return Closed();
    const uint8_t* data = bytes.data();
    uint64_t size = bytes.size();
    const auto& options = store_->options_;
    if (staging_.empty() && size >= options.direct_io_min_bytes && DirectAllowed() &&
        reinterpret_cast<uintptr_t>(data) % kDirectAlign == 0) {
      const uint64_t bulk = size / kDirectAlign * kDirectAlign;
      CAIRN_ASSIGN_OR_RETURN(uint64_t done, WriteDirect(data, bulk));
      data += done;
      size -= done;
      appended_ += done;
    }
    while (size > 0) {
      uint64_t n = std::min<uint64_t>(size, kStagingBytes - staging_.size());
      size_t old = staging_.size();
      staging_.resize(old + n);
      std::memcpy(staging_.data() + old, data, n);
      data += n;
      size -= n;
      appended_ += n;
      if (staging_.size() == kStagingBytes) CAIRN_RETURN_IF_ERROR(FlushStaging(false));
    }
    return Status::OK();
  }

  Status Commit() override {
    if (!failed_.ok()) return failed_;
    if (committed_ || fd_ < 0) return Closed();
    Status st = FlushStaging(true);
    if (st.ok() && ::fdatasync(fd_) != 0) st = Error(errno, "fdatasync");
    // Both descriptors wrote: check both close() results.
    for (int* fd : {&dfd_, &fd_}) {
      if (*fd < 0) continue;
      const int rc = ::close(*fd);
      const int err = errno;
      *fd = -1;
      if (st.ok() && rc != 0 && err != EINTR) st = Error(err, "close");
    }
    if (!st.ok()) return st;
    const int dirfd = temp_.dir.fd.get();
    if (::renameat(dirfd, temp_.name.c_str(), dirfd, temp_.dir.name.c_str()) != 0) {
      return Error(errno, "rename");
    }
    committed_ = true;
    return SyncDir(dirfd, temp_.dir.path).Annotate("writing " + store_->Describe(key_));
  }

  uint64_t size() const override { return appended_; }

 private:
  bool DirectAllowed() const {
    return store_->options_.use_direct_io &&
           !store_->direct_refused_.load(std::memory_order_relaxed);
  }
  Status Closed() const {
    return FailedPreconditionError("writer of " + store_->Describe(key_) +
                                   " already committed or failed");
  }
  Status Error(int err, std::string_view what) {
    CloseFds();
    return ErrnoError(err, "writing " + store_->Describe(key_) + ": " + std::string(what));
  }
  void CloseFds() {
    if (dfd_ >= 0) ::close(dfd_);
    dfd_ = -1;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Writes `size` bytes (a multiple of 4096, aligned memory) at the file end
  // through O_DIRECT, falling back to buffered writes when the file system
  // refuses O_DIRECT. Returns `size`.
  Result<uint64_t> WriteDirect(const uint8_t* data, uint64_t size) {
    uint64_t done = 0;
    if (dfd_ < 0 && DirectAllowed()) {
      dfd_ = ::openat(temp_.dir.fd.get(), temp_.name.c_str(),
                      O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
      if (dfd_ < 0 && errno == EINVAL) {
        store_->direct_refused_.store(true, std::memory_order_relaxed);
      } else if (dfd_ < 0) {
        return Error(errno, "opening for direct writes");
      }
    }
    if (dfd_ >= 0) {
      int err = 0;
      done = PwriteAll(dfd_, data, size, written_, store_->options_.write_chunk_bytes, &err);
      done = done / kDirectAlign * kDirectAlign;
      if (err == EINVAL) {
        store_->direct_refused_.store(true, std::memory_order_relaxed);
      } else if (err != 0) {
        return Error(err, "direct write");
      }
    }
    if (done < size) {
      int err = 0;
      PwriteAll(fd_, data + done, size - done, written_ + done,
                store_->options_.write_chunk_bytes, &err);
      if (err != 0) return Error(err, "write");
    }
    written_ += size;
    return size;
  }

  // Writes the staging buffer: its aligned part as a direct write, and with
  // `final` also the unaligned tail through the buffered descriptor.
  Status FlushStaging(bool final) {
    uint64_t bulk = staging_.size() / kDirectAlign * kDirectAlign;
    if (bulk > 0) {
      if (DirectAllowed()) {
        CAIRN_RETURN_IF_ERROR(WriteDirect(staging_.data(), bulk).status());
      } else {
        int err = 0;
        PwriteAll(fd_, staging_.data(), bulk, written_, store_->options_.write_chunk_bytes, &err);
        if (err != 0) return Error(err, "write");
        written_ += bulk;
      }
    }
    uint64_t tail = staging_.size() - bulk;
    if (tail > 0) {
      if (!final) {
        std::memmove(staging_.data(), staging_.data() + bulk, tail);
      } else {
        int err = 0;
        PwriteAll(fd_, staging_.data() + bulk, tail, written_, store_->options_.write_chunk_bytes,
                  &err);
        if (err != 0) return Error(err, "write");
        written_ += tail;
        tail = 0;
      }
    }
    staging_.resize(tail);
    return Status::OK();
  }

  FileKvStore* store_;
  std::string key_;
  FileKvStore::Temp temp_;  // its fd moved to fd_
  int fd_ = -1;
  int dfd_ = -1;
  Buffer staging_;
  uint64_t written_ = 0;   // bytes written to the file
  uint64_t appended_ = 0;  // bytes appended by the caller
  bool committed_ = false;
  Status failed_;  // the first failed Append (see Append)
};

Result<std::unique_ptr<KvWriter>> FileKvStore::OpenWriter(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  CAIRN_ASSIGN_OR_RETURN(Temp temp, CreateTemp(key));
  return std::unique_ptr<KvWriter>(
      std::make_unique<FileKvWriter>(this, std::string(key), std::move(temp)));
}

}  // namespace cairn
