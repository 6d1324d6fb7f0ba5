// FileKvStore durability protocol.
//
// Put(key, value):
//   1. Create a temporary file `.__cairn_tmp_<pid>_<n>` with O_EXCL in the
//      directory of the key (creating missing directories first; each new
//      directory's parent is fsynced so the directory entry is durable).
//   2. Write the value with large pwrite calls: the 4096-aligned bulk through
//      a second O_DIRECT descriptor when the value is large and its bytes are
//      4096-aligned, the rest (or everything, when O_DIRECT is refused with
//      EINVAL or does not apply) through the ordinary descriptor.
//   3. fdatasync the temporary file once (this covers both descriptors: it
//      flushes the inode's data), then close it.
//   4. rename() the temporary file over the key: readers see the old value or
//      the new one, never a partial file.
//   5. fsync the key's directory so the rename itself is durable.
// Put returns OK only after step 5. A crash before step 4 leaves the old value
// and possibly a temporary file, which List never shows.
//
// PutIfAbsent(key, value): steps 1-3, then link() the temporary file to the
// key (fails with EEXIST atomically when the key exists), unlink the temporary
// name, and fsync the directory.
//
// Delete(key): unlink the key, then fsync its directory.

#include "cairn/kvstore/file/file_kvstore.h"

#include <cstring>

#include "cairn/kvstore/file/posix_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace cairn {
namespace {

using file_internal::DirName;
using file_internal::FsyncDir;
using file_internal::kDirectAlign;
using file_internal::MakeDir;
using file_internal::PwriteAll;

// Staging buffer for O_DIRECT writes of unaligned caller memory.
constexpr uint64_t kDirectStageBytes = uint64_t{8} << 20;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

Status ValidateFileKey(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("invalid key `" + std::string(key.substr(0, 200)) + "`: " +
                                std::string(why));
  };
  if (key.back() == '/') return bad("trailing `/`");
  if (key.find("//") != std::string_view::npos) return bad("empty path component");
  if (key.find(FileKvStore::kTempMarker) != std::string_view::npos) {
    return bad("contains the reserved temporary-file marker");
  }
  return Status::OK();
}

FileKvStore::FileKvStore(std::string root, FileKvStoreOptions options)
    : root_(std::move(root)), options_(options) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  url_ = "file://" + root_ + (root_ == "/" ? "" : "/");
  options_.write_chunk_bytes =
      std::max<uint64_t>(kDirectAlign, options_.write_chunk_bytes / kDirectAlign * kDirectAlign);
}

Status FileKvStore::CheckKey(std::string_view key) const {
  return ValidateFileKey(key).Annotate(url_);
}

std::string FileKvStore::PathOf(std::string_view key) const {
  std::string path = root_;
  if (path != "/") path += '/';
  path += key;
  return path;
}

Status FileKvStore::EnsureParentDirs(std::string_view key) {
  // The root and its ancestors.
  for (size_t pos = root_.find('/', 1); ; pos = root_.find('/', pos + 1)) {
    std::string dir = pos == std::string::npos ? root_ : root_.substr(0, pos);
    if (dir.size() > 1) CAIRN_RETURN_IF_ERROR(MakeDir(dir));
    if (pos == std::string::npos) break;
  }
  // The key's own directories.
  for (size_t pos = key.find('/'); pos != std::string_view::npos; pos = key.find('/', pos + 1)) {
    CAIRN_RETURN_IF_ERROR(MakeDir(PathOf(key.substr(0, pos))));
  }
  return Status::OK();
}

Result<int> FileKvStore::CreateTemp(std::string_view key, std::string* tmp) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = PathOf(key);
  *tmp = std::string(DirName(path));
  *tmp += '/';
  *tmp += kTempMarker;
  *tmp += std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1));

  int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT) {
    CAIRN_RETURN_IF_ERROR(EnsureParentDirs(key).Annotate("writing " + Describe(key)));
    fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) return ErrnoError(errno, "writing " + Describe(key) + ": creating " + *tmp);
  return fd;
}

Result<std::string> FileKvStore::WriteTemp(std::string_view key, ByteView value) {
  std::string tmp;
  CAIRN_ASSIGN_OR_RETURN(int fd, CreateTemp(key, &tmp));

  auto fail = [&](int err, std::string_view what) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoError(err, "writing " + Describe(key) + ": " + std::string(what));
  };

  const uint8_t* data = value.data();
  const uint64_t size = value.size();
  uint64_t done = 0;
  if (options_.use_direct_io && size >= options_.direct_io_min_bytes &&
      !direct_refused_.load(std::memory_order_relaxed)) {
    const uint64_t bulk = size / kDirectAlign * kDirectAlign;
    int dfd = ::open(tmp.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (dfd >= 0) {
      int err = 0;
      if (reinterpret_cast<uintptr_t>(data) % kDirectAlign == 0) {
        done = PwriteAll(dfd, data, bulk, 0, options_.write_chunk_bytes, &err);
      } else {
        // The caller's bytes are not 4096-aligned (a numpy array usually is
        // not): stage them through an aligned buffer. A memcpy costs far less
        // than the page cache plus fdatasync would.
        Buffer stage(static_cast<size_t>(std::min<uint64_t>(bulk, kDirectStageBytes)));
        while (done < bulk && err == 0) {
          const uint64_t n = std::min<uint64_t>(stage.size(), bulk - done);
          std::memcpy(stage.data(), data + done, static_cast<size_t>(n));
          const uint64_t wrote = PwriteAll(dfd, stage.data(), n, done, n, &err);
          done += wrote;
          if (wrote < n && err == 0) break;  // short aligned write: finish buffered
        }
      }
      ::close(dfd);
      // EINVAL: the file system refused this O_DIRECT write; the rest goes
      // through the page cache. A short aligned write is simply continued.
      if (err == EINVAL) direct_refused_.store(true, std::memory_order_relaxed);
      if (err != 0 && err != EINVAL) return fail(err, "direct write");
      done = done / kDirectAlign * kDirectAlign;
    } else if (errno == EINVAL) {
      // open() refusing O_DIRECT (older tmpfs, some FUSE and network file
      // systems): everything goes through the buffered descriptor.
      direct_refused_.store(true, std::memory_order_relaxed);
    }
  }
  int err = 0;
  PwriteAll(fd, data + done, size - done, done, options_.write_chunk_bytes, &err);
  if (err != 0) return fail(err, "write");
  if (::fdatasync(fd) != 0) return fail(errno, "fdatasync");
  if (::close(fd) != 0) {
    int close_err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(close_err, "writing " + Describe(key) + ": close");
  }
  return tmp;
}

// Opens `key` for reading: nullopt when it is missing (or a directory), else
// the descriptor (owned by the caller) and the file's size.
Result<std::optional<std::pair<int, uint64_t>>> FileKvStore::OpenForRead(std::string_view key) {
  using Opened = std::optional<std::pair<int, uint64_t>>;
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  const std::string path = PathOf(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Opened();
    return ErrnoError(errno, "reading " + Describe(key));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(err, "reading " + Describe(key) + ": fstat");
  }
  if (S_ISDIR(st.st_mode)) {  // a directory is not a key
    ::close(fd);
    return Opened();
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return FailedPreconditionError("reading " + Describe(key) + ": not a regular file");
  }
  return Opened(std::make_pair(fd, static_cast<uint64_t>(st.st_size)));
}

// Fills `dst` from `fd` at `offset`; closes `fd` in every case.
Status FileKvStore::ReadAndClose(int fd, std::string_view key, uint64_t offset,
                                 MutableByteView dst) {
  uint64_t done = 0;
  while (done < dst.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(options_.write_chunk_bytes,
                                                      dst.size() - done));
    ssize_t r = ::pread(fd, dst.data() + done, n, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError(err, "reading " + Describe(key));
    }
    if (r == 0) {
      ::close(fd);
      return DataLossError("reading " + Describe(key) + ": file ended at byte " +
                           std::to_string(offset + done) + ", expected " +
                           std::to_string(offset + dst.size()));
    }
    done += static_cast<uint64_t>(r);
  }
  ::close(fd);
  return Status::OK();
}

Result<std::optional<Buffer>> FileKvStore::Get(std::string_view key, const ByteRange& range) {
  CAIRN_ASSIGN_OR_RETURN(auto opened, OpenForRead(key));
  if (!opened) return std::optional<Buffer>();
  const auto [fd, size] = *opened;
  auto resolved = ResolveByteRange(range, size);
  if (!resolved.ok()) {
    ::close(fd);
    return resolved.status().Annotate("reading " + Describe(key));
  }
  const auto [begin, end] = *resolved;
  Buffer out(static_cast<size_t>(end - begin));
  CAIRN_RETURN_IF_ERROR(ReadAndClose(fd, key, begin, out.mutable_view()));
  return std::optional<Buffer>(std::move(out));
}

Result<bool> FileKvStore::GetInto(std::string_view key, MutableByteView dst) {
  CAIRN_ASSIGN_OR_RETURN(auto opened, OpenForRead(key));
  if (!opened) return false;
  const auto [fd, size] = *opened;
  if (size != dst.size()) {
    ::close(fd);
    return DataLossError("reading " + Describe(key) + ": value has " + std::to_string(size) +
                         " bytes, expected " + std::to_string(dst.size()));
  }
  CAIRN_RETURN_IF_ERROR(ReadAndClose(fd, key, 0, dst));
  return true;
}

Status FileKvStore::Put(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  CAIRN_ASSIGN_OR_RETURN(std::string tmp, WriteTemp(key, value));
  const std::string path = PathOf(key);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(err, "writing " + Describe(key) + ": rename");
  }
  return FsyncDir(std::string(DirName(path))).Annotate("writing " + Describe(key));
}

Result<bool> FileKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  const std::string path = PathOf(key);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return false;  // cheap early out
  CAIRN_ASSIGN_OR_RETURN(std::string tmp, WriteTemp(key, value));
  int rc = ::link(tmp.c_str(), path.c_str());
  int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) return false;
    return ErrnoError(err, "writing " + Describe(key) + ": link");
  }
  CAIRN_RETURN_IF_ERROR(FsyncDir(std::string(DirName(path))).Annotate("writing " + Describe(key)));
  return true;
}

Status FileKvStore::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  const std::string path = PathOf(key);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) return Status::OK();
    return ErrnoError(errno, "deleting " + Describe(key));
  }
  return FsyncDir(std::string(DirName(path))).Annotate("deleting " + Describe(key));
}

namespace {

struct ListState {
  std::string_view prefix;
  std::vector<KeyInfo>* out;
};

// Lists directory `dir` (absolute), whose keys start with `rel` ("" or "a/b/").
Status WalkDir(const std::string& dir, const std::string& rel, const ListState& state) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::OK();
    return ErrnoError(errno, "listing directory " + dir);
  }
  std::vector<std::string> subdirs;
  const int dfd = ::dirfd(d);
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.find(FileKvStore::kTempMarker) != std::string_view::npos) continue;
    std::string key = rel + std::string(name);
    bool is_dir = e->d_type == DT_DIR;
    bool is_reg = e->d_type == DT_REG;
    struct stat st;
    bool have_stat = false;
    if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK || is_reg) {
      if (::fstatat(dfd, e->d_name, &st, 0) != 0) continue;  // vanished meanwhile
      have_stat = true;
      is_dir = S_ISDIR(st.st_mode);
      is_reg = S_ISREG(st.st_mode);
    }
    if (is_dir) {
      std::string sub = key + "/";
      if (StartsWith(sub, state.prefix) || StartsWith(state.prefix, sub)) {
        subdirs.emplace_back(name);
      }
    } else if (is_reg && have_stat && StartsWith(key, state.prefix)) {
      state.out->push_back(KeyInfo{std::move(key), static_cast<uint64_t>(st.st_size)});
    }
  }
  ::closedir(d);
  for (const std::string& name : subdirs) {
    CAIRN_RETURN_IF_ERROR(WalkDir(dir + "/" + name, rel + name + "/", state));
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<KeyInfo>> FileKvStore::List(std::string_view prefix) {
  std::vector<KeyInfo> out;
  // Start at the deepest directory the prefix names completely.
  size_t slash = prefix.rfind('/');
  std::string rel = slash == std::string_view::npos ? "" : std::string(prefix.substr(0, slash + 1));
  if (!rel.empty()) {
    // A directory part that no valid key can have matches nothing (and must
    // not walk outside the root).
    if (!ValidateFileKey(rel.substr(0, rel.size() - 1)).ok()) return out;
  }
  if (prefix.find('\0') != std::string_view::npos) return out;
  std::string dir = rel.empty() ? root_ : PathOf(rel.substr(0, rel.size() - 1));
  ListState state{prefix, &out};
  CAIRN_RETURN_IF_ERROR(WalkDir(dir, rel, state).Annotate("listing " + url_));
  std::sort(out.begin(), out.end(),
            [](const KeyInfo& a, const KeyInfo& b) { return a.key < b.key; });
  return out;
}

}  // namespace cairn
