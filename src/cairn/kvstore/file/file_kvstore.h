// FileKvStore: one file per key under a root directory.
//
// Key "a/b/c" is the file <root>/a/b/c; directories are created as needed
// (the root too, on first write). Writes are atomic and durable: a value is
// written to a temporary file beside its key and renamed over it (the
// protocol is spelled out at the top of file_kvstore.cc). Large values are
// written with large pwrite calls, through O_DIRECT where the file system
// allows it, with one fdatasync per file.
//
// Symbolic links and special files (policy; docs/file_kvstore.md):
//   - The root directory itself may be reached through symbolic links.
//   - Below the root nothing is followed. Every directory is opened with
//     openat(O_NOFOLLOW | O_DIRECTORY) relative to its parent's descriptor,
//     values with openat(O_NOFOLLOW | O_NONBLOCK) and fstat (safe_path.h).
//   - Only regular files are values. Get/GetInto of a key that is a symbolic
//     link, FIFO, device or socket, or whose directory path passes through a
//     symbolic link, is FailedPrecondition naming the key and the URL; Put,
//     PutIfAbsent, Delete and OpenWriter refuse a directory path through a
//     link the same way. Put replaces a non-directory entry at the key itself
//     (rename never follows the entry it replaces); Delete unlinks it.
//   - List neither descends into symbolically linked directories nor reports
//     links, FIFOs, devices or sockets: they are not keys. A prefix whose
//     directory part passes through a link lists nothing.
//   - DeletePrefix removes whole directory trees under the prefix (empty
//     subdirectories too; a prefix ending in '/' removes that directory
//     itself), unlinking links and special files without following them.
//   - List and DeletePrefix walk at most kMaxDirDepth (256) directory levels
//     and fail beyond; keys with more than 256 '/' are invalid.
//
// Keys: ValidateKey, plus no empty components ("a//b"), no trailing '/', at
// most 256 '/'. A key component may not contain ".__cairn_tmp_" (reserved for
// temporary files `.__cairn_tmp_<16 random hex digits>`, which List never
// shows).
//
// Errors: InvalidArgument for bad keys and ranges; FailedPrecondition for
// links and special files (above); I/O errors map from errno (ENOSPC ->
// ResourceExhausted, EIO -> Unavailable, ...), each naming the key and the
// store URL.
//
// Thread safety: all methods may be called concurrently, also from several
// processes and hosts on the same directory (temporary names are random and
// created with O_EXCL).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/file/safe_path.h"
#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/mapped_read.h"
#include "cairn/kvstore/positional_write.h"

namespace cairn {

struct FileKvStoreOptions {
  // Write values of at least this many bytes with O_DIRECT when the source
  // bytes are 4096-aligned (as a Buffer is) and the file system accepts it.
  bool use_direct_io = true;
  uint64_t direct_io_min_bytes = uint64_t{4} << 20;
  // Read ranges of at least this many bytes with O_DIRECT when most of the
  // range is not in the page cache (use_direct_io must be set too): the
  // bytes then go from the device straight into the Buffer, without filling
  // the page cache and copying out of it.
  uint64_t direct_read_min_bytes = uint64_t{1} << 20;
  // Size of each pwrite call.
  uint64_t write_chunk_bytes = uint64_t{64} << 20;
};

class FileKvStore : public KvStore, public PositionalWriteStore, public MappedReadStore {
 public:
  // REQUIRES: `root` is an absolute path. A trailing '/' is optional.
  explicit FileKvStore(std::string root, FileKvStoreOptions options = {});

  // Shared reads never bypass the page cache (see ReadDirect).
  void SetReadsShared(bool shared) override { reads_shared_.store(shared, std::memory_order_relaxed); }
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  // Reads straight into `dst` with pread (no intermediate buffer).
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override;
  // Reads the values in parallel on a pool of I/O threads (one pread per
  // value or range), calling `fn` from those threads.
  Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) override;
  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  // Under an exclusive lock on `<key>.__lock`, as TensorStore's file driver
  // (see file_compare_and_put.cc).
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override;
  // Removes every entry under the prefix, whole directory trees included,
  // without following symbolic links (file_list.cc).
  Status DeletePrefix(std::string_view prefix) override;
  // Streams the value into a temporary file (O_DIRECT for aligned bulk, a
  // small aligned staging buffer otherwise); Commit = steps 3-5 of Put.
  // See file_writer.cc.
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override;
  // One directory read; symlinks, FIFOs and devices come back as kOther and
  // are never followed. Prefix commits rename a temporary directory, with
  // the protocol at the top of file_commit.cc.
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override;
  Result<bool> CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) override;
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix,
                                         std::string_view pending_prefix) override;
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                            ByteView marker) override;
  // Prefixes are renamed into place: not committed in place.
  StoreCapabilities Capabilities() const override {
    StoreCapabilities c;
    c.commits_in_place = false;
    return c;
  }
  std::string url() const override { return url_; }
  // Writes in place at offsets (positional_write.h), through the page cache
  // (file_positional.cc).
  Result<std::unique_ptr<PositionalFile>> OpenPositional(std::string_view key, uint64_t keep_bytes) override;
  // Maps a range of a file on tmpfs or ramfs privately, populated read-only
  // (mapped_read.h, file_mapped.cc); nullptr elsewhere or for a range that
  // does not start on a page boundary.
  Result<std::shared_ptr<MappedBytes>> MapRange(std::string_view key, uint64_t offset,
                                                uint64_t length) override;

  // The root directory, without a trailing '/' (except for "/").
  const std::string& root() const { return root_; }

  // Marker inside the names of temporary files.
  static constexpr std::string_view kTempMarker = file_internal::kTempMarker;

 private:
  friend class FileKvWriter;
  // The key's directory, opened without following symbolic links (created,
  // durably, with `create`), its path, and the key's last component. `fd` is
  // invalid when the directory is missing (only without `create`).
  struct KeyDir {
    file_internal::UniqueFd fd;
    std::string path;
    std::string name;
  };
  // A temporary file created beside a key.
  struct Temp {
    KeyDir dir;
    std::string name;
    file_internal::UniqueFd fd;
  };

  Status CheckKey(std::string_view key) const;
  Result<KeyDir> OpenKeyDir(std::string_view key, bool create);
  Result<std::optional<std::pair<file_internal::UniqueFd, uint64_t>>> OpenForRead(
      std::string_view key);
  Status ReadAll(int fd, std::string_view key, uint64_t offset, MutableByteView dst);
  // Bytes [begin, end) of `fd` (a file of `file_size` bytes) read with
  // O_DIRECT, or nullopt when that does not apply (small or mostly cached
  // range, O_DIRECT refused): the caller then reads through the page cache.
  Result<std::optional<Buffer>> ReadDirect(int fd, std::string_view key, uint64_t begin,
                                           uint64_t end, uint64_t file_size);
  // Step 1 of the protocol: a new temporary file beside `key`.
  Result<Temp> CreateTemp(std::string_view key);
  // Steps 1-3: `value` in a new temporary file, synced and closed.
  Result<Temp> WriteTemp(std::string_view key, ByteView value);

  std::string root_;
  std::string url_;
  FileKvStoreOptions options_;
  file_internal::SafeRoot dirs_;
  std::atomic<bool> reads_shared_{false};
  // Set once the file system refuses O_DIRECT (EINVAL); later writes go
  // straight to buffered I/O.
  std::atomic<bool> direct_refused_{false};
};

// Returns `key` if it is a valid key for FileKvStore, else InvalidArgument.
Status ValidateFileKey(std::string_view key);

}  // namespace cairn
