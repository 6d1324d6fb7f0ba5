// FileKvStore: one file per key under a root directory.
//
// Key "a/b/c" is the file <root>/a/b/c; directories are created as needed
// (the root too, on first write). Writes are atomic and durable: a value is
// written to a temporary file beside its key and renamed over it (the
// protocol is spelled out at the top of file_kvstore.cc). Large values are
// written with large pwrite calls, through O_DIRECT where the file system
// allows it, with one fdatasync per file.
//
// Keys: ValidateKey, plus no empty components ("a//b") and no trailing '/'.
// A key component may not contain ".__cairn_tmp_" (reserved for temporary
// files, which List never shows).
//
// Errors: InvalidArgument for bad keys and ranges; I/O errors map from errno
// (ENOSPC -> ResourceExhausted, EIO -> Unavailable, ...), each naming the key
// and the store URL.
//
// Thread safety: all methods may be called concurrently, also from several
// processes on the same directory (distinct temporary names per process).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

struct FileKvStoreOptions {
  // Write values of at least this many bytes with O_DIRECT when the source
  // bytes are 4096-aligned (as a Buffer is) and the file system accepts it.
  bool use_direct_io = true;
  uint64_t direct_io_min_bytes = uint64_t{4} << 20;
  // Size of each pwrite call.
  uint64_t write_chunk_bytes = uint64_t{64} << 20;
};

class FileKvStore : public KvStore {
 public:
  // REQUIRES: `root` is an absolute path. A trailing '/' is optional.
  explicit FileKvStore(std::string root, FileKvStoreOptions options = {});

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  // Reads straight into `dst` with pread (no intermediate buffer).
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override;
  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override;
  // Streams the value into a temporary file (O_DIRECT for aligned bulk, a
  // small aligned staging buffer otherwise); Commit = steps 3-5 of Put.
  // See file_writer.cc.
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override;
  // One directory read; symlinks, FIFOs and devices come back as kOther and
  // are never followed. Prefix commits rename a temporary directory, with
  // the protocol at the top of file_commit.cc.
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override;
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix,
                                         std::string_view pending_prefix) override;
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                            ByteView marker) override;
  std::string url() const override { return url_; }

  // The root directory, without a trailing '/' (except for "/").
  const std::string& root() const { return root_; }

  // Marker inside the names of temporary files.
  static constexpr std::string_view kTempMarker = ".__cairn_tmp_";

 private:
  Status CheckKey(std::string_view key) const;
  Result<std::optional<std::pair<int, uint64_t>>> OpenForRead(std::string_view key);
  Status ReadAndClose(int fd, std::string_view key, uint64_t offset, MutableByteView dst);
  std::string PathOf(std::string_view key) const;
  // Creates the directories of `key`'s path below (and including) the root.
  Status EnsureParentDirs(std::string_view key);
  friend class FileKvWriter;
  // Creates a new temporary file beside `key` (its directories too); returns
  // its descriptor and sets `tmp` to its path.
  Result<int> CreateTemp(std::string_view key, std::string* tmp);
  // Writes `value` to a new temporary file in the key's directory, durably.
  Result<std::string> WriteTemp(std::string_view key, ByteView value);

  std::string root_;
  std::string url_;
  FileKvStoreOptions options_;
  // Set once the file system refuses O_DIRECT (EINVAL); later writes go
  // straight to buffered I/O.
  std::atomic<bool> direct_refused_{false};
};

// Returns `key` if it is a valid key for FileKvStore, else InvalidArgument.
Status ValidateFileKey(std::string_view key);

}  // namespace cairn
