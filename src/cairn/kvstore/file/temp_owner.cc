// See temp_owner.h (owner tags of temporary names, and the sweep protocol).
#include "cairn/kvstore/file/temp_owner.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cairn/kvstore/file/safe_path.h"
#include "cairn/util/crc32c.h"
#include "cairn/util/process_identity.h"

namespace cairn::file_internal {
namespace {

uint32_t MachineHash(const ProcessIdentity& p) {
  const std::string machine = p.host + "\n" + p.boot_id + "\n" + p.pid_ns;
  return Crc32c(AsBytes(machine));
}

struct TempOwner {
  uint32_t machine = 0;
  int64_t pid = 0;
  uint64_t start_ticks = 0;
};

// Parses "-m<8 hex>p<digits>t<digits>" at the end of `name`.
bool ParseOwner(std::string_view name, TempOwner* owner) {
  const size_t at = name.rfind("-m");
  if (at == std::string_view::npos) return false;
  const std::string tail(name.substr(at + 2));
  unsigned machine = 0;
  long long pid = 0;
  unsigned long long ticks = 0;
  int used = 0;
  if (std::sscanf(tail.c_str(), "%8xp%lldt%llu%n", &machine, &pid, &ticks, &used) != 3 ||
      used != static_cast<int>(tail.size()) || pid <= 0) {
    return false;
  }
  *owner = {machine, pid, ticks};
  return true;
}

}  // namespace

const std::string& TempOwnerTag() {
  // Per process: a forked child has another pid (and start time).
  struct Cached {
    int64_t pid = -1;
    std::string tag;
  };
  thread_local Cached cached;
  const ProcessIdentity& me = ThisProcess();
  if (cached.pid != me.pid) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "-m%08xp%lldt%llu", MachineHash(me), static_cast<long long>(me.pid),
                  static_cast<unsigned long long>(me.start_ticks));
    cached = {me.pid, buf};
  }
  return cached.tag;
}

bool TempOwnerIsGone(std::string_view name) {
  TempOwner owner;
  if (!ParseOwner(name, &owner)) return false;
  const ProcessIdentity& me = ThisProcess();
  if (me.boot_id.empty() || owner.machine != MachineHash(me)) return false;
  ProcessIdentity p = me;
  p.pid = owner.pid;
  p.start_ticks = owner.start_ticks;
  if (p.SameProcessAs(me)) return false;
  return IsGoneFromThisMachine(p);
}

int SweepDeadTemporaries(int dirfd, const std::string& dir_path) {
  // Step 1, on a descriptor of its own (closedir closes it).
  const int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return 0;
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.find(kTempMarker) != std::string_view::npos) names.emplace_back(n);
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& name : names) {
    if (!TempOwnerIsGone(name)) continue;  // step 2
    // Step 3.
    if (RemoveTree(dirfd, name, dir_path + "/" + name, kMaxDirDepth).ok()) ++removed;
  }
  return removed;
}

}  // namespace cairn::file_internal
