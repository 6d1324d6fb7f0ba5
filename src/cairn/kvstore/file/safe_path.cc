#include "cairn/kvstore/file/safe_path.h"

#include "cairn/kvstore/file/temp_owner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#if defined(__linux__) && __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#include <sys/syscall.h>
#define CAIRN_HAVE_OPENAT2 1
#endif

namespace cairn::file_internal {
namespace {

std::atomic<DirSyncObserver> g_sync_observer{nullptr};
std::atomic<TempNameSource> g_temp_name_source{nullptr};

std::string_view ParentOf(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Opens directory `path` (following symlinks) and fsyncs it.
Status SyncDirPath(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, "opening directory " + path + " to sync it");
  return SyncDir(fd.get(), path);
}

// openat2(dirfd, path, flags) resolving no symbolic link (not even at the
// last component) and nothing outside `dirfd`. -1 with errno ENOSYS where the
// kernel (before 5.6) or a seccomp filter does not offer it; remembered.
std::atomic<bool> g_openat2_works{true};
// `beneath` false allows absolute paths (RESOLVE_BENEATH refuses them).
int OpenBeneath(int dirfd, const char* path, int flags, bool beneath = true) {
#ifdef CAIRN_HAVE_OPENAT2
  if (g_openat2_works.load(std::memory_order_relaxed)) {
    struct open_how how{};
    how.flags = static_cast<uint64_t>(flags);
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (beneath ? RESOLVE_BENEATH : 0);
    const long fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != ENOSYS && errno != EPERM && errno != E2BIG && errno != EINVAL) return -1;
    g_openat2_works.store(false, std::memory_order_relaxed);
  }
#endif
  errno = ENOSYS;
  return -1;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t RandomU64() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof(v), GRND_NONBLOCK) == static_cast<ssize_t>(sizeof(v))) return v;
  // No getrandom (or no entropy yet): mix the clock, pid, a counter and an
  // address. Still distinct per process and call; O_EXCL catches the rest.
  static std::atomic<uint64_t> counter{0};
  struct timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
  x ^= SplitMix64(static_cast<uint64_t>(::getpid()) << 32 | counter.fetch_add(1));
  x ^= SplitMix64(reinterpret_cast<uintptr_t>(&v));
  return SplitMix64(x);
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Status UniqueFd::Close(std::string_view what) {
  if (fd_ < 0) return Status::OK();
  int rc = ::close(release());
  if (rc != 0 && errno != EINTR) return ErrnoError(errno, std::string(what) + ": close");
  return Status::OK();
}

EntryKind KindAt(int dirfd, const char* name) {
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return EntryKind::kMissing;
  if (S_ISREG(st.st_mode)) return EntryKind::kRegular;
  if (S_ISDIR(st.st_mode)) return EntryKind::kDirectory;
  if (S_ISLNK(st.st_mode)) return EntryKind::kSymlink;
  return EntryKind::kOther;
}

namespace {
std::string DescribeMode(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}
}  // namespace

std::string DescribeKindAt(int dirfd, const char* name) {
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return "missing";
  return DescribeMode(st.st_mode);
}

bool SetOpenat2ForTesting(bool enabled) { return g_openat2_works.exchange(enabled); }

void SetDirSyncObserverForTesting(DirSyncObserver observer) { g_sync_observer.store(observer); }
void SetTempNameSourceForTesting(TempNameSource source) { g_temp_name_source.store(source); }

Status SyncDir(int fd, const std::string& path) {
  if (DirSyncObserver observer = g_sync_observer.load()) observer(path);
  if (::fsync(fd) != 0) return ErrnoError(errno, "syncing directory " + path);
  return Status::OK();
}

std::string SafeRoot::PathOf(std::string_view rel) const {
  if (rel.empty()) return root_;
  std::string path = root_;
  if (path != "/") path += '/';
  path += rel;
  return path;
}

bool SafeRoot::KnownDurable(std::string_view rel) {
  std::lock_guard<std::mutex> lock(mu_);
  return durable_.count(std::string(rel)) != 0;
}

void SafeRoot::MarkDurable(std::string_view rel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (durable_.size() >= kMaxKnown) durable_.clear();
  durable_.emplace(rel);
}

Result<UniqueFd> SafeRoot::OpenRoot(bool create) {
  UniqueFd fd(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno != ENOENT) return ErrnoError(errno, "opening directory " + root_);
    if (!create) return UniqueFd();
    // D1 for the root and its missing ancestors, top down.
    for (size_t pos = root_.find('/', 1);; pos = root_.find('/', pos + 1)) {
      const std::string dir = pos == std::string::npos ? root_ : root_.substr(0, pos);
      if (dir.size() > 1) {
        if (::mkdir(dir.c_str(), 0755) == 0) {
          CAIRN_RETURN_IF_ERROR(SyncDirPath(std::string(ParentOf(dir))));
        } else if (errno != EEXIST) {
          return ErrnoError(errno, "creating directory " + dir);
        }
      }
      if (pos == std::string::npos) break;
    }
    fd = UniqueFd(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoError(errno, "opening directory " + root_);
    MarkDurable("");
    return fd;
  }
  if (create && !KnownDurable("")) {
    // D2: whoever created the root may have died before syncing its parent
    // (and before removing its temporaries: temp_owner.h).
    if (root_ != "/") CAIRN_RETURN_IF_ERROR(SyncDirPath(std::string(ParentOf(root_))));
    SweepDeadTemporaries(fd.get(), root_);
    MarkDurable("");
  }
  return fd;
}

Result<UniqueFd> SafeRoot::OpenDir(std::string_view rel, bool create) {
  CAIRN_ASSIGN_OR_RETURN(UniqueFd root, OpenRoot(create));
  if (!root.valid() || rel.empty()) return root;
  if (!create || KnownDurable(rel)) {
    // Fast path: one call when no link is on the way and (for writes) every
    // directory is known durable already (it and its ancestors were synced).
    const int fd = OpenBeneath(root.get(), std::string(rel).c_str(),
                               O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) return UniqueFd(fd);
    if (errno == ENOENT && !create) return UniqueFd();
  }
  return OpenDirFrom(std::move(root), rel, create);
}

Result<UniqueFd> SafeRoot::OpenDirFrom(UniqueFd root, std::string_view rel, bool create) {
  UniqueFd cur = std::move(root);
  size_t start = 0;
  while (true) {
    const size_t end = rel.find('/', start);
    const std::string comp(rel.substr(start, end == std::string_view::npos ? end : end - start));
    const std::string_view sub = rel.substr(0, end);
    const std::string_view parent = start == 0 ? std::string_view() : rel.substr(0, start - 1);
    if (comp.empty() || comp == "." || comp == "..") {
      return InvalidArgumentError("invalid directory `" + std::string(rel) + "` below " + root_);
    }
    constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    UniqueFd next(::openat(cur.get(), comp.c_str(), kFlags));
    bool created = false;
    if (!next.valid() && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), comp.c_str(), 0755) == 0) {
        created = true;
      } else if (errno != EEXIST) {
        return ErrnoError(errno, "creating directory " + PathOf(sub));
      }
      next = UniqueFd(::openat(cur.get(), comp.c_str(), kFlags));
    }
    if (!next.valid()) {
      const int err = errno;
      if (err == ENOENT && !create) return UniqueFd();
      if (err == ENOTDIR) {
        const EntryKind kind = KindAt(cur.get(), comp.c_str());
        if (!create && (kind == EntryKind::kRegular || kind == EntryKind::kMissing)) {
          return UniqueFd();  // a key below a value (or one that just vanished): missing
        }
        return FailedPreconditionError(
            "`" + PathOf(sub) + "` is " + DescribeKindAt(cur.get(), comp.c_str()) +
            ", not a directory (the file kvstore follows no symbolic links below its root)");
      }
      return ErrnoError(err, "opening directory " + PathOf(sub));
    }
    if (create && (created || !KnownDurable(sub))) {
      // D1 (created) or D2 (existing, first use): make its entry durable;
      // D2 also removes the temporaries of dead owners (temp_owner.h).
      CAIRN_RETURN_IF_ERROR(SyncDir(cur.get(), PathOf(parent)));
      if (!created) SweepDeadTemporaries(next.get(), PathOf(sub));
      MarkDurable(sub);
    }
    cur = std::move(next);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return cur;
}

namespace {

// Checks that `fd` (opened O_NONBLOCK) is a regular file and clears
// O_NONBLOCK: an invalid fd for a directory, FailedPrecondition otherwise.
Result<UniqueFd> CheckRegular(UniqueFd fd, uint64_t* size) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "fstat");
  if (S_ISDIR(st.st_mode)) return UniqueFd();  // a directory is not a key
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError("it is " + DescribeMode(st.st_mode) +
                                   "; only regular files are values");
  }
  // F_SETFL sets only the status flags (O_APPEND, O_NONBLOCK, ...); none of
  // the others was asked for, so 0 just clears O_NONBLOCK.
  if (::fcntl(fd.get(), F_SETFL, 0) != 0) return ErrnoError(errno, "fcntl");
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

Result<UniqueFd> OpenRegularForRead(int dirfd, const std::string& name, uint64_t* size) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return UniqueFd();
    if (err == ELOOP || err == ENXIO || err == EWOULDBLOCK) {
      return FailedPreconditionError("it is " + DescribeKindAt(dirfd, name.c_str()) +
                                     "; only regular files are values (symbolic links are "
                                     "not followed below the root)");
    }
    return ErrnoError(err, "open");
  }
  return CheckRegular(std::move(fd), size);
}

Result<UniqueFd> SafeRoot::OpenValue(std::string_view rel, uint64_t* size) {
  constexpr int kFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;
  // Fastest: the whole absolute path in one call when no link is anywhere on
  // it (the usual case; `rel` has no "..", so it stays below the root). A
  // root reached through links makes it fail with ELOOP: remembered.
  bool tried_whole_path = false;
  if (!root_path_has_links_.load(std::memory_order_relaxed)) {
    tried_whole_path = true;
    const int fd = OpenBeneath(AT_FDCWD, PathOf(rel).c_str(), kFlags, /*beneath=*/false);
    if (fd >= 0) return CheckRegular(UniqueFd(fd), size);
    if (errno == ENOENT) return UniqueFd();
  }
  CAIRN_ASSIGN_OR_RETURN(UniqueFd root, OpenRoot(/*create=*/false));
  if (!root.valid()) return UniqueFd();
  const int fd = OpenBeneath(root.get(), std::string(rel).c_str(), kFlags);
  if (fd >= 0) {
    if (tried_whole_path) root_path_has_links_.store(true, std::memory_order_relaxed);
    return CheckRegular(UniqueFd(fd), size);
  }
  if (errno == ENOENT) return UniqueFd();
  // A link at the key or on the way (ELOOP), a non-directory on the way
  // (ENOTDIR), no openat2, ...: the walk tells which, naming it.
  const size_t slash = rel.rfind('/');
  const std::string_view dir_rel = slash == std::string_view::npos ? "" : rel.substr(0, slash);
  UniqueFd dir;
  if (dir_rel.empty()) {
    dir = std::move(root);
  } else {
    CAIRN_ASSIGN_OR_RETURN(dir, OpenDirFrom(std::move(root), dir_rel, /*create=*/false));
    if (!dir.valid()) return dir;
  }
  const std::string name(slash == std::string_view::npos ? rel : rel.substr(slash + 1));
  return OpenRegularForRead(dir.get(), name, size);
}

std::string NewTempName() {
  if (TempNameSource source = g_temp_name_source.load()) return source();
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t r = RandomU64();
  std::string name(kTempMarker);
  for (int i = 0; i < 16; ++i, r >>= 4) name += kHex[r & 15];
  return name + TempOwnerTag();
}

Result<UniqueFd> CreateTempFile(int dirfd, const std::string& dir_path, std::string* name) {
  constexpr int kAttempts = 16;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    *name = NewTempName();
    UniqueFd fd(::openat(dirfd, name->c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.valid()) return fd;
    if (errno != EEXIST) return ErrnoError(errno, "creating " + dir_path + "/" + *name);
  }
  return AlreadyExistsError("creating a temporary file in " + dir_path + ": " +
                            std::to_string(kAttempts) + " random names were all taken");
}

Status RemoveTree(int dirfd, const std::string& name, const std::string& path, int depth_budget) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status::OK();
    if (errno != ENOTDIR) return ErrnoError(errno, "opening directory " + path);
    // Not a directory (a symbolic link among others): remove the entry itself.
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoError(errno, "deleting " + path);
    }
    return Status::OK();
  }
  if (depth_budget <= 0) {
    return FailedPreconditionError("deleting " + path + ": directories nested more than " +
                                   std::to_string(kMaxDirDepth) + " levels deep");
  }
  DIR* d = ::fdopendir(fd.get());
  if (d == nullptr) return ErrnoError(errno, "listing directory " + path);
  fd.release();  // owned by `d` now
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  Status st;
  if (errno != 0) st = ErrnoError(errno, "listing directory " + path);
  for (size_t i = 0; st.ok() && i < names.size(); ++i) {
    st = RemoveTree(::dirfd(d), names[i], path + "/" + names[i], depth_budget - 1);
  }
  ::closedir(d);
  CAIRN_RETURN_IF_ERROR(st);
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return ErrnoError(errno, "deleting directory " + path);
  }
  return Status::OK();
}

}  // namespace cairn::file_internal
