// Symlink-safe, durable access to the files below a FileKvStore root.
//
// Policy (see also file_kvstore.h and docs/file_kvstore.md):
//   - The root directory itself may be reached through symbolic links.
//   - Below the root nothing is followed: every directory is opened with
//     openat(parent, component, O_NOFOLLOW | O_DIRECTORY) relative to the
//     descriptor of its parent, starting at the root's descriptor, and files
//     are opened with O_NOFOLLOW relative to their directory's descriptor.
//   - Only regular files are values. A symbolic link, FIFO, device or socket
//     where a key or one of its directories should be is FailedPrecondition.
//
// Durability of directories (the steps the file driver's protocol refers to):
//   D1. A directory this code creates (mkdir / mkdirat) has its parent
//       fsynced right after, so its entry is durable. The new directory's own
//       entries are synced when the next directory or the value is created in
//       it (D1 for a directory below it, or the writer's final directory sync).
//   D2. A directory that already exists is not trusted to be durable: its
//       creator may have died before syncing its parent. Before a SafeRoot
//       first depends on it (creates something inside it), it fsyncs the
//       directory's parent once; the root's parent likewise. The same first
//       use removes the temporaries dead owners left in it (temp_owner.h).
//   D3. Every close() of a descriptor that was written is checked.
//
// Thread safety: SafeRoot may be used from any number of threads; the free
// functions are stateless (apart from the testing observer).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "cairn/result.h"

namespace cairn::file_internal {

// Marker inside the names of temporary files (never a key component).
inline constexpr std::string_view kTempMarker = ".__cairn_tmp_";

// Deepest directory nesting below the root that List and DeletePrefix walk
// (one descriptor is held per level). Keys with more components are invalid.
inline constexpr int kMaxDirDepth = 256;

// An owned file descriptor, closed on destruction (error ignored: use Close
// for descriptors that were written).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes and reports close()'s error, naming `what`.
  Status Close(std::string_view what);

 private:
  int fd_ = -1;
};

// The kind of a directory entry, without following a symbolic link.
enum class EntryKind { kMissing, kRegular, kDirectory, kSymlink, kOther };
EntryKind KindAt(int dirfd, const char* name);
// "a symbolic link", "a FIFO", "a character device", ... for messages.
std::string DescribeKindAt(int dirfd, const char* name);

// Called with the path of every directory fsynced by SyncDir (tests count
// them). nullptr (the default) turns it off.
using DirSyncObserver = void (*)(const std::string& path);
void SetDirSyncObserverForTesting(DirSyncObserver observer);

// Turns the openat2 fast path of SafeRoot off (false) or back on (true), so
// tests cover the component walk that kernels before 5.6 use. Returns the
// previous setting.
bool SetOpenat2ForTesting(bool enabled);

// fsyncs the open directory `fd`; `path` names it in errors.
Status SyncDir(int fd, const std::string& path);

// A root directory and symlink-free walks below it.
class SafeRoot {
 public:
  // `root`: an absolute path without a trailing '/' ("/" itself allowed).
  explicit SafeRoot(std::string root) : root_(std::move(root)) {}

  const std::string& path() const { return root_; }
  // root + "/" + rel (rel "" gives the root).
  std::string PathOf(std::string_view rel) const;

  // Opens the root (following symlinks on the way to it). Without `create`
  // an invalid fd when it does not exist; with `create` it is created with
  // its missing ancestors (D1), and an existing root is made durable (D2).
  Result<UniqueFd> OpenRoot(bool create);

  // Opens directory `rel` ("" for the root, else "a/b" with no empty, "."
  // or ".." components) without following symbolic links.
  //   create false: an invalid fd when a component is missing or is a
  //     regular file; FailedPrecondition when one is a symbolic link or
  //     another non-directory (naming it).
  //   create true: missing directories are created (D1), existing ones made
  //     durable once per SafeRoot (D2); a component that is a file or link
  //     is FailedPrecondition.
  Result<UniqueFd> OpenDir(std::string_view rel, bool create);

  // Opens the value `rel` ("a/b/c", a valid key) for reading, as
  // OpenRegularForRead does in its directory: an invalid fd when it or a
  // directory on the way is missing (or it is a directory), FailedPrecondition
  // for a link or special file at it or on the way. One openat2 call
  // (RESOLVE_NO_SYMLINKS) of the whole path where the kernel offers it and no
  // link leads to the root, else one below the root's descriptor; the
  // component walk where openat2 is missing, and to name what is wrong.
  Result<UniqueFd> OpenValue(std::string_view rel, uint64_t* size);

 private:
  Result<UniqueFd> OpenDirFrom(UniqueFd root, std::string_view rel, bool create);
  bool KnownDurable(std::string_view rel);
  void MarkDurable(std::string_view rel);

  std::string root_;
  // Set once a value opened below the root but not by its whole absolute
  // path: the root is reached through a link (OpenValue's first try fails).
  std::atomic<bool> root_path_has_links_{false};
  std::mutex mu_;
  // Directories (relative to the root; "" is the root) known durable: created
  // and synced by this SafeRoot, or synced per D2. Cleared when it grows past
  // kMaxKnown entries (that only costs repeated syncs).
  std::unordered_set<std::string> durable_;
  static constexpr size_t kMaxKnown = size_t{1} << 16;
};

// Opens the regular file `name` in directory `dirfd` for reading: O_NOFOLLOW
// and O_NONBLOCK (cleared after the check, so a FIFO cannot block), then
// fstat. An invalid fd when it is missing or a directory; FailedPrecondition
// for a symbolic link, FIFO, device or socket. Sets `*size`.
Result<UniqueFd> OpenRegularForRead(int dirfd, const std::string& name, uint64_t* size);

// A fresh temporary name: kTempMarker + 16 hex digits from getrandom (a
// 64-bit random suffix, so names differ across hosts, restarts and pids),
// then this process's owner tag (temp_owner.h).
std::string NewTempName();
// Replaces NewTempName's random source (tests of the EEXIST retry); nullptr
// restores it.
using TempNameSource = std::string (*)();
void SetTempNameSourceForTesting(TempNameSource source);

// Creates a new temporary file in `dirfd` with O_EXCL | O_NOFOLLOW, retrying
// with a new random name on EEXIST. Sets `*name`. `dir_path` is for errors.
Result<UniqueFd> CreateTempFile(int dirfd, const std::string& dir_path, std::string* name);

// Removes entry `name` of `dirfd`: a directory with everything below it
// (subdirectories opened with O_NOFOLLOW, at most `depth_budget` levels), or
// any other entry (a symbolic link is unlinked itself, never followed).
// Missing is OK. `path` names the entry in errors.
Status RemoveTree(int dirfd, const std::string& name, const std::string& path, int depth_budget);

}  // namespace cairn::file_internal
