// The demo's yardstick: the bandwidth of the device under the demo's
// directory, measured in the same run with a file of the same size.
//
// Write: O_DIRECT writes of 64 MiB from an aligned buffer, then fsync.
// Read: O_DIRECT reads of the same file. Where the file system refuses
// O_DIRECT (tmpfs, some FUSE), buffered writes + fsync and buffered reads
// after evicting the file from the page cache (posix_fadvise DONTNEED) are
// measured instead, and `method` says so. The file is removed afterwards.
//
// Thread safety: functions are independent.
#pragma once

#include <cstdint>
#include <string>

#include "cairn/interrupt.h"
#include "cairn/status.h"

namespace cairn::cli {

struct DeviceBandwidth {
  double write_seconds = 0;  // write + fsync of `bytes`
  double read_seconds = 0;   // cold read of `bytes`
  uint64_t bytes = 0;
  std::string method;        // "O_DIRECT" or "buffered + fsync, page cache evicted"
};

// Errors: those of the writes and reads, naming the file; kCancelled when
// `interrupt` (may be null) is requested (checked between 64 MiB blocks).
// The file is removed in every case.
Status MeasureDevice(const std::string& dir, uint64_t bytes, DeviceBandwidth* out,
                     const Interrupt* interrupt = nullptr);

// Evicts every regular file below `dir` from the page cache (after the
// save made them durable), so that the restore reads the device.
void EvictFromPageCache(const std::string& dir);

}  // namespace cairn::cli
