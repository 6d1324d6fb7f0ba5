// Reads the identity of processes from /proc (process_identity.h).
#include "cairn/util/process_identity.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

namespace cairn {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

ProcessIdentity Compute() {
  ProcessIdentity p;
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) == 0) p.host = host;
  p.boot_id = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (n > 0) p.pid_ns.assign(ns, static_cast<size_t>(n));
  p.pid = ::getpid();
  p.start_ticks = ProcessStartTicks(p.pid).value_or(0);
  return p;
}

}  // namespace

const ProcessIdentity& ThisProcess() {
  // Recomputed when the pid changed (a forked child).
  static std::mutex mu;
  static ProcessIdentity* self = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (self == nullptr || self->pid != ::getpid()) {
    delete self;
    self = new ProcessIdentity(Compute());
  }
  return *self;
}

std::optional<uint64_t> ProcessStartTicks(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 (the command) is in parentheses and may hold spaces: fields
  // 3.. follow the last ')'. The start time is field 22.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
  }
  char* end = nullptr;
  unsigned long long ticks = std::strtoull(field.c_str(), &end, 10);
  if (end == field.c_str() || *end != '\0') return std::nullopt;
  return static_cast<uint64_t>(ticks);
}

bool IsGoneFromThisMachine(const ProcessIdentity& p) {
  const ProcessIdentity& self = ThisProcess();
  if (!self.SameMachineAs(p)) return false;
  std::optional<uint64_t> start = ProcessStartTicks(p.pid);
  return !start.has_value() || *start != p.start_ticks;
}

}  // namespace cairn
