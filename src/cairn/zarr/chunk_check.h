// Checking one stored chunk, as a reader would decode it: the one place
// that says whether a chunk is intact. `cairn verify` (every format) calls
// it for every chunk of every array.
//
// A chunk is intact when it decodes through the array's codec chain (zstd
// frame checksums, crc32c codecs, shard index CRCs are all checked by the
// codecs) to exactly one chunk's bytes. With `require_all` (the writer
// stored every chunk, as Orbax and JAX do), an absent chunk, or an absent
// inner chunk of a shard, is damage too.
//
// Thread safety: pure function.
#pragma once

#include <optional>
#include <string>

#include "cairn/util/buffer.h"
#include "cairn/zarr/metadata.h"

namespace cairn {

struct ChunkCheck {
  enum class Kind { kOk, kMissing, kMissingInner, kCorrupt };
  Kind kind = Kind::kOk;
  std::string message;  // what is wrong, empty when kOk
  bool ok() const { return kind == Kind::kOk; }
};

// `stored`: the chunk's stored bytes, or nullopt when the key is absent.
ChunkCheck CheckStoredChunk(const ArrayMetadata& metadata, const std::optional<Buffer>& stored,
                            bool require_all);

// "missing_chunk", "missing_inner_chunk", "corrupt_chunk" ("" for kOk).
const char* ChunkCheckKindName(ChunkCheck::Kind kind);

}  // namespace cairn
