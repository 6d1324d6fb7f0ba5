// FileKvStore::List and FileKvStore::DeletePrefix: walks below the root that
// never follow a symbolic link (directories are opened with
// openat(O_NOFOLLOW | O_DIRECTORY) relative to their parent's descriptor).
//
// List(prefix) reports regular files only; it does not descend into linked
// directories and does not report links, FIFOs, devices or sockets (they are
// not keys), nor temporary files. A prefix whose directory part passes
// through a link lists nothing.
//
// DeletePrefix(prefix) protocol:
//   1. Open the directory that holds the matching entries without following
//      links: for "a/b/" the parent "a" of the named directory "b", for "a/b"
//      the directory "a". Missing, or reached only through a link: no key
//      starts with the prefix; OK.
//   2. Remove the matching entries: "b" itself for "a/b/" (a directory or a
//      link to one); every entry of "a" whose name starts with "b" (except
//      temporary files) for "a/b". A directory is removed with everything
//      below it, children first, each subdirectory opened with O_NOFOLLOW; a
//      link or special file is unlinked itself, never followed.
//   3. fsync the directory of step 1 once, if anything was removed.
// A crash part way leaves some entries removed and others not (DeletePrefix
// is not atomic); each removal is a single unlinkat.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "cairn/kvstore/file/file_kvstore.h"

namespace cairn {
namespace {

using file_internal::kMaxDirDepth;
using file_internal::UniqueFd;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// A DIR* closed on destruction.
class DirStream {
 public:
  explicit DirStream(DIR* d) : d_(d) {}
  ~DirStream() {
    if (d_ != nullptr) ::closedir(d_);
  }
  DirStream(const DirStream&) = delete;
  DirStream& operator=(const DirStream&) = delete;
  DIR* get() const { return d_; }
  int fd() const { return ::dirfd(d_); }

 private:
  DIR* d_;
};

// Opens a directory stream on `fd` (taken over). `path` is for errors.
Result<std::unique_ptr<DirStream>> OpenStream(UniqueFd fd, const std::string& path) {
  DIR* d = ::fdopendir(fd.get());
  if (d == nullptr) return ErrnoError(errno, "listing directory " + path);
  fd.release();
  return std::make_unique<DirStream>(d);
}

// The names in `stream` other than "." and "..". `path` is for errors.
Result<std::vector<std::string>> ReadNames(DirStream& stream, const std::string& path) {
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(stream.get());
    if (e == nullptr) {
      if (errno != 0) return ErrnoError(errno, "listing directory " + path);
      return names;
    }
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
}

struct ListState {
  std::string_view prefix;
  const file_internal::SafeRoot* root;
  std::vector<KeyInfo>* out;
};

// Lists the directory open as `fd`, at `level` below the root, whose keys
// start with `rel` ("" or "a/b/").
Status WalkDir(UniqueFd fd, const std::string& rel, int level, const ListState& state) {
  const std::string path = state.root->PathOf(rel.empty() ? "" : rel.substr(0, rel.size() - 1));
  CAIRN_ASSIGN_OR_RETURN(auto stream, OpenStream(std::move(fd), path));
  std::vector<std::string> subdirs;
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(stream->get());
    if (e == nullptr) {
      if (errno != 0) return ErrnoError(errno, "listing directory " + path);
      break;
    }
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.find(FileKvStore::kTempMarker) != std::string_view::npos) continue;
    std::string key = rel + std::string(name);
    bool is_dir = false;
    bool is_reg = false;
    struct stat st;
    switch (e->d_type) {
      case DT_DIR:
        is_dir = true;
        break;
      case DT_REG:
      case DT_UNKNOWN:
        if (::fstatat(stream->fd(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        is_dir = S_ISDIR(st.st_mode);
        is_reg = S_ISREG(st.st_mode);
        break;
      default:  // symbolic links, FIFOs, devices, sockets: not keys
        continue;
    }
    if (is_dir) {
      std::string sub = key + "/";
      if (StartsWith(sub, state.prefix) || StartsWith(state.prefix, sub)) {
        subdirs.emplace_back(name);
      }
    } else if (is_reg && StartsWith(key, state.prefix)) {
      state.out->push_back(KeyInfo{std::move(key), static_cast<uint64_t>(st.st_size)});
    }
  }
  for (const std::string& name : subdirs) {
    if (level + 1 > kMaxDirDepth) {
      return FailedPreconditionError("directory " + path + "/" + name + " is nested more than " +
                                     std::to_string(kMaxDirDepth) + " levels below the root");
    }
    UniqueFd child(
        ::openat(stream->fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child.valid()) {
      if (errno == ENOENT || errno == ENOTDIR) continue;  // vanished or replaced meanwhile
      return ErrnoError(errno, "opening directory " + path + "/" + name);
    }
    CAIRN_RETURN_IF_ERROR(WalkDir(std::move(child), rel + name + "/", level + 1, state));
  }
  return Status::OK();
}

int Levels(std::string_view rel) {
  return rel.empty() ? 0 : 1 + static_cast<int>(std::count(rel.begin(), rel.end(), '/'));
}

}  // namespace

Result<std::vector<KeyInfo>> FileKvStore::List(std::string_view prefix) {
  std::vector<KeyInfo> out;
  if (prefix.find('\0') != std::string_view::npos) return out;
  // Start at the deepest directory the prefix names completely.
  const size_t slash = prefix.rfind('/');
  const std::string rel_dir =
      slash == std::string_view::npos ? "" : std::string(prefix.substr(0, slash));
  // A directory part that no valid key can have matches nothing (and must
  // not walk outside the root).
  if (!rel_dir.empty() && !ValidateFileKey(rel_dir).ok()) return out;
  auto dir = dirs_.OpenDir(rel_dir, /*create=*/false);
  if (!dir.ok()) {
    // Through a link or a special file: no keys there.
    if (dir.status().code() == StatusCode::kFailedPrecondition) return out;
    return dir.status().Annotate("listing " + url_);
  }
  if (!dir->valid()) return out;
  ListState state{prefix, &dirs_, &out};
  CAIRN_RETURN_IF_ERROR(WalkDir(std::move(*dir), rel_dir.empty() ? "" : rel_dir + "/",
                                Levels(rel_dir), state)
                            .Annotate("listing " + url_));
  std::sort(out.begin(), out.end(),
            [](const KeyInfo& a, const KeyInfo& b) { return a.key < b.key; });
  return out;
}

Status FileKvStore::DeletePrefix(std::string_view prefix) {
  if (prefix.find('\0') != std::string_view::npos) return Status::OK();
  const bool whole_dir = !prefix.empty() && prefix.back() == '/';
  // Step 1: `parent` holds the entries to remove; `match` selects them.
  std::string_view named = whole_dir ? prefix.substr(0, prefix.size() - 1) : prefix;
  const size_t slash = named.rfind('/');
  const std::string parent(slash == std::string_view::npos ? "" : named.substr(0, slash));
  const std::string match(slash == std::string_view::npos ? named : named.substr(slash + 1));
  if (whole_dir && !ValidateFileKey(named).ok()) return Status::OK();
  if (!parent.empty() && !ValidateFileKey(parent).ok()) return Status::OK();
  const std::string what = "deleting prefix `" + std::string(prefix) + "` of " + url_;
  auto dir = dirs_.OpenDir(parent, /*create=*/false);
  if (!dir.ok()) {
    if (dir.status().code() == StatusCode::kFailedPrecondition) return Status::OK();
    return dir.status().Annotate(what);
  }
  if (!dir->valid()) return Status::OK();
  const std::string parent_path = dirs_.PathOf(parent);
  const int budget = kMaxDirDepth - Levels(parent);

  // Step 2.
  std::vector<std::string> names;
  if (whole_dir) {
    const auto kind = file_internal::KindAt(dir->get(), match.c_str());
    if (kind == file_internal::EntryKind::kDirectory ||
        kind == file_internal::EntryKind::kSymlink) {
      names.push_back(match);
    }
  } else {
    UniqueFd again(::openat(dir->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!again.valid()) return ErrnoError(errno, what + ": opening " + parent_path);
    auto stream = OpenStream(std::move(again), parent_path);
    if (!stream.ok()) return stream.status().Annotate(what);
    auto all = ReadNames(**stream, parent_path);
    if (!all.ok()) return all.status().Annotate(what);
    for (std::string& name : *all) {
      if (StartsWith(name, match) &&
          name.find(FileKvStore::kTempMarker) == std::string::npos) {
        names.push_back(std::move(name));
      }
    }
  }
  for (const std::string& name : names) {
    const std::string path = parent_path == "/" ? "/" + name : parent_path + "/" + name;
    CAIRN_RETURN_IF_ERROR(file_internal::RemoveTree(dir->get(), name, path, budget).Annotate(what));
  }
  // Step 3.
  if (names.empty()) return Status::OK();
  return file_internal::SyncDir(dir->get(), parent_path).Annotate(what);
}

}  // namespace cairn
