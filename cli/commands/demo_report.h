// The demo's result table: what was measured and how it compares with the
// device's own bandwidth and with a plain memcpy of the state.
#pragma once

#include <cstdint>
#include <string>

namespace cairn::cli {

struct DemoTimings {
  uint64_t state_bytes = 0;
  double memcpy_seconds = 0;   // copying the state into fresh buffers
  double stall_seconds = 0;    // StartSaveCheckpoint until it returned
  double save_seconds = 0;     // StartSaveCheckpoint until Wait returned (durable commit)
  double restore_seconds = 0;  // cold restore onto the other sharding
  uint64_t stored_bytes = 0;   // the checkpoint's size on disk
  double device_write_seconds = 0;
  double device_read_seconds = 0;
  uint64_t device_bytes = 0;
  std::string device_method;
};

// Prints the table to stdout.
void PrintDemoTable(const DemoTimings& t);

// The 1-minute load average ("1.23"), or "?" when it cannot be read.
std::string LoadAverage();

}  // namespace cairn::cli
