#include "commands/demo_device.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace cairn::cli {
namespace {

constexpr uint64_t kBlock = uint64_t{64} << 20;
constexpr uint64_t kAlign = 4096;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// EINVAL (O_DIRECT refused) is InvalidArgument, so the caller can retry
// without O_DIRECT; anything else Unavailable.
Status Errno(const std::string& what, const std::string& path) {
  const int err = errno;
  return Status(err == EINVAL ? StatusCode::kInvalidArgument : StatusCode::kUnavailable,
                what + " " + path + ": " + std::strerror(err));
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status WriteFile(const std::string& path, const uint8_t* block, uint64_t bytes, bool direct,
                 const Interrupt* interrupt) {
  Fd f;
  f.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
  if (f.fd < 0) return Errno("creating", path);
  for (uint64_t done = 0; done < bytes;) {
    CAIRN_RETURN_IF_ERROR(CheckInterrupt(interrupt, "measuring the device"));
    const uint64_t n = std::min(kBlock, bytes - done);
    const ssize_t w = ::pwrite(f.fd, block, n, static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Errno("writing", path);
    done += static_cast<uint64_t>(w);
  }
  if (::fsync(f.fd) != 0) return Errno("fsync of", path);
  return Status::OK();
}

Status ReadFile(const std::string& path, uint8_t* block, uint64_t bytes, bool direct, const Interrupt* interrupt) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (f.fd < 0) return Errno("opening", path);
  if (!direct) ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
  for (uint64_t done = 0; done < bytes;) {
    CAIRN_RETURN_IF_ERROR(CheckInterrupt(interrupt, "measuring the device"));
    const uint64_t n = std::min(kBlock, bytes - done);
    const ssize_t r = ::pread(f.fd, block, n, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Errno("reading", path);
    done += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

}  // namespace

Status MeasureDevice(const std::string& dir, uint64_t bytes, DeviceBandwidth* out, const Interrupt* interrupt) {
  bytes = std::max(kAlign, bytes / kAlign * kAlign);  // O_DIRECT wants whole blocks
  void* raw = nullptr;
  if (::posix_memalign(&raw, kAlign, kBlock) != 0) {
    return Status(StatusCode::kResourceExhausted, "allocating the device test buffer");
  }
  std::unique_ptr<uint8_t, decltype(&std::free)> block(static_cast<uint8_t*>(raw), &std::free);
  uint64_t s = 0x2545f4914f6cdd1dULL;
  for (uint64_t i = 0; i < kBlock; i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    std::memcpy(block.get() + i, &s, 8);
  }
  const std::string path = dir + "/device-bandwidth.bin";
  bool direct = true;
  auto t0 = std::chrono::steady_clock::now();
  Status st = WriteFile(path, block.get(), bytes, true, interrupt);
  if (st.code() == StatusCode::kInvalidArgument) {
    direct = false;
    t0 = std::chrono::steady_clock::now();
    st = WriteFile(path, block.get(), bytes, false, interrupt);
  }
  out->write_seconds = Since(t0);
  if (st.ok()) {
    t0 = std::chrono::steady_clock::now();
    st = ReadFile(path, block.get(), bytes, direct, interrupt);
    out->read_seconds = Since(t0);
  }
  ::unlink(path.c_str());
  out->bytes = bytes;
  out->method = direct ? "O_DIRECT" : "buffered + fsync, page cache evicted";
  return st;
}

void EvictFromPageCache(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

}  // namespace cairn::cli
