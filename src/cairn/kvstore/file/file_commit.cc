// FileKvStore: ListChildren and the prefix commit (kvstore.h).
//
// Prefix commit protocol of the file driver (a prefix "a/b/" is the
// directory <root>/a/b):
//   1. BeginPrefixCommit(final, pending): AlreadyExists when <root>/final is
//      a non-empty directory or not a directory. Creates <root>/pending and
//      any missing ancestor, fsyncing the parent of every directory created,
//      so the pending directory survives a crash once Begin returns.
//   2. The caller writes its keys under `pending` (each Put durable on its
//      own: file_kvstore.cc).
//   3. FinishPrefixCommit(commit, marker_name, marker):
//      a. opens <root>/pending without following symlinks: NotFound when it
//         is gone (a newer Begin of the same final prefix removed it);
//      b. writes the marker key with Put (temporary file, fsync, rename,
//         fsync of the directory), unless marker_name is empty;
//      c. fsyncs every regular file and every directory under pending,
//         deepest first, so nothing written by any writer is still only in
//         the page cache;
//      d. creates the final directory's parent if missing (as in step 1) and
//         renames <root>/pending to <root>/final: readers see all of it or
//         nothing. An empty directory at final is replaced; a non-empty one
//         fails the rename (AlreadyExists);
//      e. fsyncs the parent of final (and the parent of pending when it is
//         another directory), making the rename durable. OK only after e.
//      The rename never replaces a step: renameat2(RENAME_NOREPLACE), and
//      only an empty directory at final is removed (rmdir, which refuses a
//      non-empty one) and the rename tried again.
// A crash before d leaves the pending directory, which callers remove when
// they begin the next commit of the same final prefix.
//
// CreatePrefixHolding(prefix, name, value): a directory that is never seen
// without its first file (a save's owner record):
//   1. mkdir a hidden staging directory `<leaf><kTempMarker><random>` beside
//      <root>/prefix (ListChildren hides kTempMarker names);
//   2. write `name` into it (O_EXCL), fsync the file and the staging dir;
//   3. renameat2(RENAME_NOREPLACE) the staging directory to <root>/prefix:
//      EEXIST means the prefix exists: remove the staging directory, false;
//   4. fsync the parent. A crash before 3 leaves a hidden staging directory.
//
// Walks below the root use openat with O_NOFOLLOW | O_DIRECTORY, so a symlink
// inside the root is never followed; ListChildren reports it (and FIFOs,
// sockets, devices) as ChildEntry::Kind::kOther.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/posix_io.h"

namespace cairn {
namespace {

// Directory nesting that FinishPrefixCommit's sync walk accepts.
constexpr int kMaxSyncDepth = 64;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

std::vector<std::string_view> Components(std::string_view rel) {
  std::vector<std::string_view> out;
  while (!rel.empty()) {
    size_t slash = rel.find('/');
    if (slash != 0) out.push_back(rel.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rel.remove_prefix(slash + 1);
  }
  return out;
}

Status SyncFd(int fd, const std::string& what) {
  if (::fsync(fd) != 0) return ErrnoError(errno, "syncing " + what);
  return Status::OK();
}

// Opens the root directory (following symlinks: the root is the user's
// choice). With `create`, creates it and its missing ancestors.
Result<Fd> OpenRoot(const std::string& root, bool create) {
  if (create) {
    std::string path;
    for (std::string_view c : Components(root)) {
      path += "/";
      path += c;
      CAIRN_RETURN_IF_ERROR(file_internal::MakeDir(path));
    }
  }
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opening directory " + root);
  return Fd(fd);
}

// Opens directory `rel` below `root_fd` one component at a time without
// following symlinks. With `create`, makes missing components (fsyncing the
// parent of each). Sets *missing (when given) instead of failing for ENOENT.
Result<Fd> OpenDirBelow(Fd root_fd, std::string_view rel, bool create, const std::string& where,
                        bool* missing = nullptr) {
  Fd cur = std::move(root_fd);
  std::string sofar;  // `rel` up to this component, named in errors
  for (std::string_view c : Components(rel)) {
    std::string name(c);
    sofar += (sofar.empty() ? "" : "/") + name;
    int fd = ::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoError(errno, where + ": creating directory `" + sofar + "`");
      }
      CAIRN_RETURN_IF_ERROR(SyncFd(cur.get(), "the parent of `" + name + "` in " + where));
      fd = ::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      int err = errno;
      if ((err == ENOENT) && missing != nullptr) {
        *missing = true;
        return Fd();
      }
      struct stat st;
      const bool link = ::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      if (err == ENOTDIR && !link) return ErrnoError(err, where + ": `" + sofar + "` is not a directory");
      if (err == ELOOP || err == ENOTDIR) {
        return FailedPreconditionError(where + ": `" + sofar +
                                       "` is not a directory (symlinks inside the store are not followed)");
      }
      return ErrnoError(err, "opening `" + name + "` of " + where);
    }
    cur = Fd(fd);
  }
  if (missing != nullptr) *missing = false;
  return cur;
}

struct DirEntryInfo {
  std::string name;
  mode_t mode;
};

// Entries of an open directory (not "." / ".."), with lstat-style modes.
// Takes ownership of `dir_fd`'s duplicate; `dir_fd` stays open.
Result<std::vector<DirEntryInfo>> ReadDirEntries(int dir_fd, const std::string& where) {
  int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return ErrnoError(errno, "listing " + where);
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    int err = errno;
    ::close(dup);
    return ErrnoError(err, "listing " + where);
  }
  std::vector<DirEntryInfo> out;
  for (;;) {
    // errno is cleared before every read: readdir leaves it alone at the
    // end, and an entry's stat below may have set it (removed meanwhile).
    errno = 0;
    dirent* e = ::readdir(d);
    if (e == nullptr) break;
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st;
    if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      int err = errno;
      ::closedir(d);
      return ErrnoError(err, "listing " + where + ": stat of `" + std::string(n) + "`");
    }
    out.push_back({std::string(n), st.st_mode});
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoError(err, "listing " + where);
  return out;
}

// Step 3c: fsync every regular file and directory below `dir_fd`, then it.
Status SyncTree(int dir_fd, const std::string& where, int depth) {
  if (depth > kMaxSyncDepth) {
    return FailedPreconditionError("syncing " + where + ": directories nested deeper than " +
                                   std::to_string(kMaxSyncDepth));
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<DirEntryInfo> entries, ReadDirEntries(dir_fd, where));
  for (const DirEntryInfo& e : entries) {
    const std::string sub = where + "/" + e.name;
    if (S_ISDIR(e.mode)) {
      int fd = ::openat(dir_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return ErrnoError(errno, "opening " + sub + " to sync");
      Fd holder(fd);
      CAIRN_RETURN_IF_ERROR(SyncTree(fd, sub, depth + 1));
    } else if (S_ISREG(e.mode)) {
      int fd = ::openat(dir_fd, e.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) return ErrnoError(errno, "opening " + sub + " to sync");
      Fd holder(fd);
      CAIRN_RETURN_IF_ERROR(SyncFd(fd, sub));
    }
    // Symlinks and special files are neither followed nor synced.
  }
  return SyncFd(dir_fd, where);
}

std::string_view StripSlash(std::string_view prefix) {
  return prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1);
}

// Splits "a/b/c" into ("a/b", "c").
std::pair<std::string_view, std::string> SplitLast(std::string_view rel) {
  size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view(), std::string(rel)};
  return {rel.substr(0, slash), std::string(rel.substr(slash + 1))};
}

// Step 3d: rename without replacing. An empty directory at `to` (one that
// BeginPrefixCommit's check allowed) is removed first; rmdir refuses a
// non-empty one, so a step another commit published meanwhile stays.
int RenameNoReplace(int from_dir, const std::string& from, int to_dir, const std::string& to) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::renameat2(from_dir, from.c_str(), to_dir, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    if (errno == EINVAL || errno == ENOSYS) {
      // A filesystem without RENAME_NOREPLACE: rename(2) of a directory
      // still fails on a non-empty target (ENOTEMPTY).
      return ::renameat(from_dir, from.c_str(), to_dir, to.c_str());
    }
    if (errno != EEXIST || attempt > 0) return -1;
    if (::unlinkat(to_dir, to.c_str(), AT_REMOVEDIR) != 0) {
      errno = EEXIST;
      return -1;
    }
  }
  return -1;
}

}  // namespace

Result<bool> FileKvStore::CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "prefix in " + url_, false));
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(StripSlash(prefix)).Annotate(url_));
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(std::string(prefix) + std::string(name)).Annotate(url_));
  if (name.find('/') != std::string_view::npos) return InvalidArgumentError("name `" + std::string(name) + "` has a '/'");
  const std::string where = "creating " + Describe(prefix);
  auto [parent, leaf] = SplitLast(StripSlash(prefix));
  CAIRN_ASSIGN_OR_RETURN(Fd root, OpenRoot(root_, /*create=*/true));
  CAIRN_ASSIGN_OR_RETURN(Fd dir, OpenDirBelow(std::move(root), parent, /*create=*/true, where));
  // Step 1.
  const std::string staging = leaf + file_internal::NewTempName();
  if (::mkdirat(dir.get(), staging.c_str(), 0755) != 0) return ErrnoError(errno, where + ": mkdir " + staging);
  auto discard = [&](int err, const std::string& what) -> Status {
    ::unlinkat(dir.get(), (staging + "/" + std::string(name)).c_str(), 0);
    ::unlinkat(dir.get(), staging.c_str(), AT_REMOVEDIR);
    return ErrnoError(err, where + ": " + what);
  };
  // Step 2.
  {
    int sfd = ::openat(dir.get(), staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0) return discard(errno, "opening " + staging);
    Fd staging_fd(sfd);
    const std::string file(name);
    int ffd = ::openat(sfd, file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (ffd < 0) return discard(errno, "creating " + file);
    Fd file_fd(ffd);
    const uint8_t* p = value.data();
    size_t left = value.size();
    while (left > 0) {
      ssize_t n = ::write(ffd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return discard(n < 0 ? errno : EIO, "writing " + file);
      p += n;
      left -= static_cast<size_t>(n);
    }
    if (::fsync(ffd) != 0) return discard(errno, "syncing " + file);
    if (::fsync(sfd) != 0) return discard(errno, "syncing " + staging);
  }
  // Step 3.
  if (::renameat2(dir.get(), staging.c_str(), dir.get(), leaf.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    Status gone = discard(err, "renaming " + staging);
    if (err == EEXIST) return false;
    return gone;
  }
  // Step 4.
  CAIRN_RETURN_IF_ERROR(SyncFd(dir.get(), "the parent directory of " + Describe(prefix)));
  return true;
}

Result<std::vector<ChildEntry>> FileKvStore::ListChildren(std::string_view prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "ListChildren prefix of " + url_, /*allow_empty=*/true));
  if (!prefix.empty()) CAIRN_RETURN_IF_ERROR(ValidateFileKey(StripSlash(prefix)).Annotate(url_));
  std::vector<ChildEntry> out;
  int root_fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    if (errno == ENOENT) return out;
    return ErrnoError(errno, "listing " + url_);
  }
  bool missing = false;
  const std::string where = Describe(prefix);
  CAIRN_ASSIGN_OR_RETURN(Fd dir, OpenDirBelow(Fd(root_fd), StripSlash(prefix), false, where, &missing));
  if (missing) return out;
  CAIRN_ASSIGN_OR_RETURN(std::vector<DirEntryInfo> entries, ReadDirEntries(dir.get(), where));
  for (const DirEntryInfo& e : entries) {
    if (e.name.find(kTempMarker) != std::string::npos) continue;
    ChildEntry c;
    c.name = e.name;
    c.kind = S_ISDIR(e.mode) ? ChildEntry::Kind::kPrefix
             : S_ISREG(e.mode) ? ChildEntry::Kind::kKey
                               : ChildEntry::Kind::kOther;
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const ChildEntry& a, const ChildEntry& b) { return a.name < b.name; });
  return out;
}

Result<PrefixCommit> FileKvStore::BeginPrefixCommit(std::string_view final_prefix,
                                                    std::string_view pending_prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(final_prefix, "final prefix in " + url_, false));
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(pending_prefix, "pending prefix in " + url_, false));
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(StripSlash(final_prefix)).Annotate(url_));
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(StripSlash(pending_prefix)).Annotate(url_));
  if (final_prefix.starts_with(pending_prefix) || pending_prefix.starts_with(final_prefix)) {
    return InvalidArgumentError("committing " + Describe(final_prefix) + ": pending prefix " +
                                std::string(pending_prefix) + " overlaps it");
  }
  // Step 1: the final directory must be absent or empty.
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> existing, ListChildren(final_prefix));
  if (!existing.empty()) {
    return AlreadyExistsError("committing " + Describe(final_prefix) + ": it already exists and is not empty");
  }
  {
    auto [parent, name] = SplitLast(StripSlash(final_prefix));
    CAIRN_ASSIGN_OR_RETURN(Fd root, OpenRoot(root_, /*create=*/true));
    bool missing = false;
    CAIRN_ASSIGN_OR_RETURN(Fd dir, OpenDirBelow(std::move(root), parent, false, url_, &missing));
    struct stat st;
    if (!missing && ::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
      return AlreadyExistsError("committing " + Describe(final_prefix) + ": a non-directory exists there");
    }
  }
  CAIRN_ASSIGN_OR_RETURN(Fd root, OpenRoot(root_, /*create=*/true));
  CAIRN_ASSIGN_OR_RETURN(Fd pending, OpenDirBelow(std::move(root), StripSlash(pending_prefix), /*create=*/true,
                                                  "committing " + Describe(final_prefix)));
  return PrefixCommit{std::string(final_prefix), std::string(pending_prefix), /*in_place=*/false};
}

Status FileKvStore::FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                                       ByteView marker) {
  const std::string where = "committing " + Describe(commit.final_prefix);
  if (commit.in_place) return InvalidArgumentError(where + ": the file driver does not commit in place");
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(commit.final_prefix, "final prefix in " + url_, false));
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(commit.pending_prefix, "pending prefix in " + url_, false));
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(StripSlash(commit.final_prefix)).Annotate(url_));
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(StripSlash(commit.pending_prefix)).Annotate(url_));
  const std::string_view pending_rel = StripSlash(commit.pending_prefix);
  const std::string_view final_rel = StripSlash(commit.final_prefix);
  auto [pending_parent, pending_name] = SplitLast(pending_rel);
  auto [final_parent, final_name] = SplitLast(final_rel);

  // a. The pending directory must still exist.
  bool missing = false;
  CAIRN_ASSIGN_OR_RETURN(Fd root, OpenRoot(root_, false));
  CAIRN_ASSIGN_OR_RETURN(Fd pending, OpenDirBelow(std::move(root), pending_rel, false, where, &missing));
  if (missing) {
    return NotFoundError(where + ": pending directory " + commit.pending_prefix +
                         " is gone (a newer commit of the same prefix removed it)");
  }
  // b. The marker.
  if (!marker_name.empty()) {
    CAIRN_RETURN_IF_ERROR(Put(commit.pending_prefix + std::string(marker_name), marker).Annotate(where));
  }
  // c. Everything below pending.
  CAIRN_RETURN_IF_ERROR(SyncTree(pending.get(), root_ + "/" + std::string(pending_rel), 0).Annotate(where));
  // d. Rename into place.
  CAIRN_ASSIGN_OR_RETURN(Fd root2, OpenRoot(root_, false));
  CAIRN_ASSIGN_OR_RETURN(Fd from_dir, OpenDirBelow(std::move(root2), pending_parent, false, where));
  CAIRN_ASSIGN_OR_RETURN(Fd root3, OpenRoot(root_, false));
  CAIRN_ASSIGN_OR_RETURN(Fd to_dir, OpenDirBelow(std::move(root3), final_parent, /*create=*/true, where));
  if (RenameNoReplace(from_dir.get(), pending_name, to_dir.get(), final_name) != 0) {
    int err = errno;
    if (err == ENOTEMPTY || err == EEXIST || err == ENOTDIR || err == EISDIR) {
      return AlreadyExistsError(where + ": it appeared while committing (rename from " +
                                commit.pending_prefix + ": " + std::strerror(err) + ")");
    }
    if (err == ENOENT) {
      return NotFoundError(where + ": pending directory " + commit.pending_prefix + " vanished");
    }
    return ErrnoError(err, where + ": renaming " + commit.pending_prefix);
  }
  // e. Make the rename durable.
  CAIRN_RETURN_IF_ERROR(SyncFd(to_dir.get(), "the parent directory of " + Describe(commit.final_prefix)));
  if (pending_parent != final_parent) {
    CAIRN_RETURN_IF_ERROR(SyncFd(from_dir.get(), "the parent directory of " + Describe(commit.pending_prefix)));
  }
  return Status::OK();
}

}  // namespace cairn
