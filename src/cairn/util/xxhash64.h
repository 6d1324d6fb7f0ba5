// XXH64 (the xxHash 64-bit hash), as the Zstandard frame format uses it for
// its content checksum (RFC 8878 section 3.1.1: the low 4 bytes of
// XXH64(content, seed 0)). Written from the algorithm's public
// specification (xxhash_spec.md, "XXH64 Algorithm Description").
//
// Thread safety: pure function.
#pragma once

#include <cstdint>

#include "cairn/util/buffer.h"

namespace cairn {

// XXH64 of `data` with `seed`. Xxh64(empty, 0) == 0xEF46DB3751D8E999.
uint64_t Xxh64(ByteView data, uint64_t seed = 0);

}  // namespace cairn
