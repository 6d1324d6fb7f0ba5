// The block cache of freed large Buffers (buffer.cc keeps blocks of 1 MiB
// and up, 512 MiB in all by default, for the next Buffer of that size).
// A caller that bounds its memory (the converter) lowers the cap and counts
// it in its budget.
//
// Thread safety: both functions may be called from any thread.
#pragma once

#include <cstddef>

namespace cairn {

// Caps the bytes of freed blocks the cache keeps, freeing what it holds
// beyond `bytes`; returns the previous cap.
size_t SetBufferBlockCacheLimit(size_t bytes);

// Bytes of freed blocks the cache holds now.
size_t BufferBlockCacheBytes();

}  // namespace cairn
