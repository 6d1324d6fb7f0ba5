// ProcessIdentity: what names a running process across hosts and restarts,
// so that a record it leaves (a save's owner record: layout/orbax/
// save_owner.h) can later be checked against the living processes.
//
// A process is the same one when host name, boot id, PID namespace, pid and
// start time (clock ticks since boot, /proc/<pid>/stat field 22) all match.
// A pid alone is not enough: pids are reused, and every container has its
// own pid 1.
//
// Thread safety: all functions may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cairn {

struct ProcessIdentity {
  std::string host;     // gethostname
  std::string boot_id;  // /proc/sys/kernel/random/boot_id ("" when unreadable)
  std::string pid_ns;   // readlink /proc/self/ns/pid ("" when unreadable)
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // 0 when unreadable

  // Same host, boot and pid namespace: only then can a pid be looked up.
  bool SameMachineAs(const ProcessIdentity& o) const {
    return !host.empty() && !boot_id.empty() && host == o.host && boot_id == o.boot_id && pid_ns == o.pid_ns;
  }
  bool SameProcessAs(const ProcessIdentity& o) const {
    return SameMachineAs(o) && pid == o.pid && start_ticks == o.start_ticks;
  }
};

// This process (computed once; a forked child computes its own).
const ProcessIdentity& ThisProcess();

// The start time of process `pid` on this machine, nullopt when there is no
// such process (or /proc cannot tell).
std::optional<uint64_t> ProcessStartTicks(int64_t pid);

// True when `p` ran on this machine (SameMachineAs) and is provably gone:
// its pid is free, or held by a process that started at another time.
// False for processes of other machines (nothing can be proven about them).
bool IsGoneFromThisMachine(const ProcessIdentity& p);

}  // namespace cairn
