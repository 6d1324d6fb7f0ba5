#include "cairn/util/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace cairn {

uint32_t Crc32cExtend(uint32_t crc, ByteView data) {
  uint32_t state = crc ^ 0xFFFFFFFFu;
  const uint8_t* p = data.data();
  size_t n = data.size();
  // ISA-L takes an int length: feed at most 1 GiB at a time.
  while (n > 0) {
    int step = static_cast<int>(n < (size_t{1} << 30) ? n : (size_t{1} << 30));
    state = crc32_iscsi(const_cast<uint8_t*>(p), step, state);
    p += step;
    n -= static_cast<size_t>(step);
  }
  return state ^ 0xFFFFFFFFu;
}

uint32_t Crc32c(ByteView data) { return Crc32cExtend(0, data); }

}  // namespace cairn
