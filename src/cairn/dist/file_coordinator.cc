// The file-based coordinator; the steps are in file_coordinator.h.
#include "cairn/dist/file_coordinator.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "cairn/dist/collective_util.h"
#include "cairn/util/hex.h"
#include "cairn/util/xxhash64.h"

namespace cairn::dist {
namespace {

namespace fs = std::filesystem;

std::string KeyFile(const std::string& directory, std::string_view key) {
  const ByteView bytes(reinterpret_cast<const uint8_t*>(key.data()), key.size());
  const uint64_t h[2] = {Xxh64(bytes, 0), Xxh64(bytes, 0x9e3779b97f4a7c15ULL)};
  return directory + "/" + HexLower(reinterpret_cast<const unsigned char*>(h), sizeof h);
}

Status WriteAll(int fd, std::string_view value, const std::string& path) {
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "writing " + path);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status SetFile(const std::string& directory, std::string_view key, std::string_view value) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = KeyFile(directory, key);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "file coordinator: setting key `" + std::string(key) + "` in " + directory);
  Status s = WriteAll(fd, value, tmp);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError(errno, "closing " + tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoError(errno, "renaming " + tmp);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s.Annotate("file coordinator: setting key `" + std::string(key) + "`");
  }
  return Status::OK();
}

// The file's bytes; NotFound while it does not exist.
Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opening " + path);
  std::string out;
  char buf[1 << 14];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = ErrnoError(errno, "reading " + path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Result<std::string> GetFile(const std::string& directory, std::string_view key, Coordinator::Duration timeout) {
  const std::string path = KeyFile(directory, key);
  const Clock::time_point deadline = DeadlineAfter(timeout);
  auto delay = std::chrono::microseconds(500);
  while (true) {
    Result<std::string> r = ReadFile(path);
    if (r.ok() || r.status().code() != StatusCode::kNotFound) return r;
    if (Clock::now() >= deadline) {
      return UnavailableError("file coordinator: no value for key `" + std::string(key) + "` in " + directory +
                              " within " + FormatSeconds(timeout));
    }
    std::this_thread::sleep_for(std::min<Coordinator::Duration>(delay, TimeLeft(deadline)));
    delay = std::min(delay * 2, std::chrono::microseconds(20000));
  }
}

std::string WithoutTrailingSlashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

std::unique_ptr<Coordinator> NewFileCoordinator(std::string directory, int process_index, int process_count) {
  CoordinatorCallbacks cb;
  cb.key_value_set = [directory](std::string_view key, std::string_view value) {
    return SetFile(directory, key, value);
  };
  cb.blocking_key_value_get = [directory](std::string_view key, Coordinator::Duration timeout) {
    return GetFile(directory, key, timeout);
  };
  return NewCallbackCoordinator(process_index, process_count, std::move(cb));
}

std::string CoordinationDirectoryFor(const std::string& checkpoint_path) {
  const fs::path p(WithoutTrailingSlashes(checkpoint_path));
  return (p.parent_path() / (".cairn-coordination." + p.filename().string())).string();
}

Result<SharedFileCoordination> BeginSharedFileCoordination(const std::string& checkpoint_path,
                                                           int process_index, int process_count,
                                                           const NamedBarrier& barrier) {
  if (checkpoint_path.find("://") != std::string::npos) {
    return InvalidArgumentError("saving " + checkpoint_path +
                                ": processes that share only a `barrier` coordinate through local files; "
                                "pass a `coordinator` for a URL");
  }
  if (process_count < 1 || process_index < 0 || process_index >= process_count) {
    return InvalidArgumentError("saving " + checkpoint_path + ": process index " + std::to_string(process_index) +
                                " is not in [0, " + std::to_string(process_count) + ")");
  }
  if (!barrier) return InvalidArgumentError("saving " + checkpoint_path + ": file coordination needs a barrier");
  SharedFileCoordination out;
  out.directory = CoordinationDirectoryFor(checkpoint_path);
  if (process_index == 0) {
    std::error_code ec;
    fs::remove_all(out.directory, ec);
    if (ec) return ErrnoError(ec.value(), "removing the coordination directory " + out.directory);
    fs::create_directories(out.directory, ec);
    if (ec) return ErrnoError(ec.value(), "creating the coordination directory " + out.directory);
  }
  CAIRN_RETURN_IF_ERROR(barrier("cairn_save_coordination"));
  out.coordinator = NewFileCoordinator(out.directory, process_index, process_count);
  return out;
}

Status EndSharedFileCoordination(const std::string& directory, int process_index, const NamedBarrier& barrier) {
  CAIRN_RETURN_IF_ERROR(barrier("cairn_save_done"));
  if (process_index == 0) {
    std::error_code ec;
    fs::remove_all(directory, ec);
    if (ec) return ErrnoError(ec.value(), "removing the coordination directory " + directory);
  }
  return Status::OK();
}

Result<CoordinatorSource> ChooseSaveCoordinator(const SaveCoordinatorFacts& f) {
  if (f.given) return CoordinatorSource::kGiven;
  if (f.process_count <= 1) return CoordinatorSource::kDetected;
  if (f.runtime_runs_these_processes) return CoordinatorSource::kJobRuntime;
  if (!f.has_barrier) {
    return InvalidArgumentError("saving " + f.checkpoint_path + ": " + std::to_string(f.process_count) +
                                " processes need a `barrier` callable or a `coordinator`");
  }
  if (f.checkpoint_path.find("://") != std::string::npos) {
    return InvalidArgumentError("saving " + f.checkpoint_path +
                                ": processes that share only a `barrier` coordinate through local files; "
                                "pass a `coordinator` for a URL");
  }
  return CoordinatorSource::kSharedFiles;
}

}  // namespace cairn::dist
