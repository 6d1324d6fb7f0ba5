// Completing a partial zarr v3 `codecs` list the way TensorStore completes a
// spec before it writes `zarr.json`.
//
// Thread safety: pure function.
#pragma once

#include "cairn/dtype/dtype.h"
#include "cairn/util/json.h"

namespace cairn {

// Returns `codecs` (a list; null means empty) with TensorStore's defaults
// filled in for elements of `dtype` in chunks of `rank` dimensions:
//  - "name" strings become {"name": ...}; empty configurations are dropped;
//  - a `bytes` codec (little-endian; no configuration for 1-byte types) is
//    inserted after the array->array codecs when no array->bytes codec
//    follows them, and a missing `endian` is set to "little";
//  - transpose "C"/"F" become explicit permutations;
//  - zstd gets level 3 and checksum false, gzip level 6, blosc cname lz4,
//    clevel 5, shuffle (bitshuffle for 1-byte elements, else shuffle),
//    typesize = element size (dropped with noshuffle), blocksize 0;
//  - sharding_indexed gets its `codecs` completed recursively (default
//    [bytes]), `index_codecs` (default [bytes little, crc32c]) completed for
//    uint64, and index_location "end" dropped.
// InvalidArgument for a list element that is not a string or an object with
// a string "name". Codec names are not checked here (CodecChain::FromJson
// rejects unknown ones).
Result<Json> CompleteCodecsJson(const Json& codecs, DType dtype, size_t rank);

}  // namespace cairn
