// CRC-32C (Castagnoli), as used by the zarr v3 `crc32c` codec, the sharding
// index and every OCDBT object. Hardware-accelerated through ISA-L.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "cairn/util/buffer.h"

namespace cairn {

// CRC-32C of `data` (standard: init 0xFFFFFFFF, final xor 0xFFFFFFFF).
// Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(ByteView data);

// Extends a finished CRC-32C `crc` of some prefix with `data`:
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, ByteView data);

}  // namespace cairn
