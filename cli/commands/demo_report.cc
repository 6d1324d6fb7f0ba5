#include "commands/demo_report.h"

#include <cstdio>
#include <fstream>

namespace cairn::cli {
namespace {

double Rate(uint64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

void Row(const char* what, double seconds, double gbps, const std::string& compared) {
  std::printf("%-30s %9.2f %9.2f   %s\n", what, seconds, gbps, compared.c_str());
}

std::string Format(const char* fmt, double a, double b = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

}  // namespace

void PrintDemoTable(const DemoTimings& t) {
  const double write_bw = Rate(t.device_bytes, t.device_write_seconds);
  const double read_bw = Rate(t.device_bytes, t.device_read_seconds);
  const double save_bw = Rate(t.state_bytes, t.save_seconds);
  const double restore_bw = Rate(t.state_bytes, t.restore_seconds);
  std::printf("%-30s %9s %9s   %s\n", "", "seconds", "GB/s", "compared with");
  Row("memcpy of the state", t.memcpy_seconds, Rate(t.state_bytes, t.memcpy_seconds), "");
  Row("save stall (until it returns)", t.stall_seconds, Rate(t.state_bytes, t.stall_seconds),
      Format("%.2fx the memcpy", t.memcpy_seconds > 0 ? t.stall_seconds / t.memcpy_seconds : 0));
  Row("save (durable commit)", t.save_seconds, save_bw,
      Format("%.0f%% of the device's write bandwidth", write_bw > 0 ? 100 * save_bw / write_bw : 0));
  Row("restore, other sharding, cold", t.restore_seconds, restore_bw,
      Format("%.0f%% of the device's read bandwidth", read_bw > 0 ? 100 * restore_bw / read_bw : 0));
  Row("device write + fsync", t.device_write_seconds, write_bw, t.device_method);
  Row("device read, cold", t.device_read_seconds, read_bw, t.device_method);
  std::printf("stored %.1f MB for %.1f MB of state (%.2f); throughputs count state bytes\n",
              t.stored_bytes / 1e6, t.state_bytes / 1e6,
              t.state_bytes ? static_cast<double>(t.stored_bytes) / t.state_bytes : 0);
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string first;
  if (!(f >> first)) return "?";
  return first;
}

}  // namespace cairn::cli
