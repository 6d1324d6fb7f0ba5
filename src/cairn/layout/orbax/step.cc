#include "cairn/layout/orbax/step.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <system_error>

#include "cairn/layout/orbax/metadata_files.h"

namespace cairn::orbax {
namespace fs = std::filesystem;
namespace {

Status FsError(const std::error_code& ec, std::string_view what, const std::string& path) {
  return ErrnoError(ec.value(), std::string(what) + " " + path);
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Status SyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opening " + path + " to sync");
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError(err, "syncing " + path);
  return Status::OK();
}

std::string Parent(const std::string& path) {
  fs::path p(path);
  std::string parent = p.parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

std::string StepName(int64_t step, const StepNameFormat& format) {
  std::string num = std::to_string(step);
  if (format.fixed_length && static_cast<int>(num.size()) < *format.fixed_length) {
    num.insert(0, *format.fixed_length - num.size(), '0');
  }
  return format.prefix.empty() ? num : format.prefix + "_" + num;
}

std::optional<int64_t> ParseStepName(std::string_view name, const StepNameFormat& format) {
  if (!format.prefix.empty()) {
    std::string want = format.prefix + "_";
    if (name.substr(0, want.size()) != want) return std::nullopt;
    name.remove_prefix(want.size());
  }
  if (!AllDigits(name) || name.size() > 18) return std::nullopt;
  if (format.fixed_length) {
    if (static_cast<int>(name.size()) < *format.fixed_length) return std::nullopt;
    if (static_cast<int>(name.size()) > *format.fixed_length && name[0] == '0') return std::nullopt;
  } else if (name.size() > 1 && name[0] == '0') {
    return std::nullopt;
  }
  return std::stoll(std::string(name));
}

bool IsTmpName(std::string_view name) { return name.find(kTmpSuffix) != std::string_view::npos; }

Result<std::vector<StepInfo>> ListSteps(const std::string& root, const StepNameFormat& format,
                                        bool require_commit_file) {
  if (!IsDirectory(root)) return NotFoundError("checkpoint root " + root + " is not a directory");
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(root));
  std::vector<StepInfo> out;
  for (const std::string& name : names) {
    if (IsTmpName(name)) continue;
    std::optional<int64_t> step = ParseStepName(name, format);
    if (!step) continue;
    std::string path = (fs::path(root) / name).string();
    if (!IsDirectory(path)) continue;
    if (require_commit_file && !IsRegularFile(path + "/" + std::string(kCommitSuccessFile))) continue;
    out.push_back({*step, path});
  }
  std::sort(out.begin(), out.end(), [](const StepInfo& a, const StepInfo& b) { return a.step < b.step; });
  return out;
}

Result<std::vector<StepInfo>> DiscoverSteps(const std::string& root) {
  if (!IsDirectory(root)) return NotFoundError("checkpoint root " + root + " is not a directory");
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(root));
  std::map<int64_t, std::string> found;
  for (const std::string& name : names) {
    if (IsTmpName(name)) continue;
    size_t digits = name.size();
    while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') --digits;
    if (digits == name.size()) continue;
    if (digits > 0 && (digits < 2 || name[digits - 1] != '_')) continue;
    std::string_view num = std::string_view(name).substr(digits);
    if (num.size() > 18) continue;
    std::string path = (fs::path(root) / name).string();
    if (!IsDirectory(path)) continue;
    bool looks_like_step = IsRegularFile(path + "/" + std::string(kCheckpointMetadataFile)) ||
                           IsRegularFile(path + "/" + std::string(kCommitSuccessFile));
    if (!looks_like_step) {
      auto entries = ListDirectory(path);
      if (!entries.ok()) continue;
      for (const std::string& e : *entries) {
        if (IsRegularFile(path + "/" + e + "/" + std::string(kTreeMetadataFile))) looks_like_step = true;
      }
    }
    if (!looks_like_step) continue;
    found.emplace(std::stoll(std::string(num)), path);
  }
  std::vector<StepInfo> out;
  for (auto& [step, path] : found) out.push_back({step, path});
  return out;
}

Result<std::string> BeginCommit(const std::string& final_path) {
  std::error_code ec;
  if (fs::exists(final_path, ec)) {
    return AlreadyExistsError("checkpoint directory " + final_path + " already exists");
  }
  std::string tmp = final_path + std::string(kTmpSuffix);
  fs::remove_all(tmp, ec);
  if (ec) return FsError(ec, "removing leftover", tmp);
  fs::create_directories(tmp, ec);
  if (ec) return FsError(ec, "creating", tmp);
  return tmp;
}

Status FinishCommit(const std::string& tmp_path, const std::string& final_path) {
  CAIRN_RETURN_IF_ERROR(WriteSmallFile(tmp_path + "/" + std::string(kCommitSuccessFile),
                                       "Checkpoint commit was successful to " + final_path));
  CAIRN_RETURN_IF_ERROR(SyncPath(tmp_path, /*directory=*/true));
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    return ErrnoError(errno, "renaming " + tmp_path + " to " + final_path);
  }
  return SyncPath(Parent(final_path), /*directory=*/true);
}

Result<std::string> ReadSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opening " + path);
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError(err, "reading " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteSmallFile(const std::string& path, std::string_view contents) {
  std::error_code ec;
  std::string dir = Parent(path);
  fs::create_directories(dir, ec);
  if (ec) return FsError(ec, "creating", dir);
  std::string tmp = path + ".__cairn_tmp_" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "creating " + tmp);
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoError(err, "writing " + tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoError(err, "syncing " + tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(err, "renaming " + tmp + " to " + path);
  }
  return SyncPath(dir, /*directory=*/true);
}

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

Result<std::vector<std::string>> ListDirectory(const std::string& path) {
  std::error_code ec;
  std::vector<std::string> out;
  fs::directory_iterator it(path, ec);
  if (ec) return FsError(ec, "listing", path);
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return FsError(ec, "listing", path);
    out.push_back(it->path().filename().string());
  }
  if (ec) return FsError(ec, "listing", path);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace cairn::orbax
