#include "cairn/dist/collective_util.h"

#include <cstdio>

namespace cairn::dist {

Clock::time_point DeadlineAfter(Coordinator::Duration timeout) {
  const Clock::time_point now = Clock::now();
  if (timeout <= Coordinator::Duration::zero()) return now;
  const auto room = Clock::time_point::max() - now;
  if (timeout >= room) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

Coordinator::Duration TimeLeft(Clock::time_point deadline) {
  const Clock::time_point now = Clock::now();
  if (deadline <= now) return Coordinator::Duration::zero();
  return std::chrono::duration_cast<Coordinator::Duration>(deadline - now);
}

std::string FormatSeconds(Coordinator::Duration d) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g s", std::chrono::duration<double>(d).count());
  return buf;
}

uint64_t HashName(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace cairn::dist
