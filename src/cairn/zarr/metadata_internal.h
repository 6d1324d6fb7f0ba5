// Pieces shared by metadata.cc (v3) and metadata_v2.cc. Not a public API.
#pragma once

#include <string_view>

#include "cairn/zarr/metadata.h"

namespace cairn::internal_zarr {

inline constexpr size_t kMaxRank = 32;                    // as TensorStore
inline constexpr Index kMaxDimension = Index{1} << 62;    // as TensorStore

// A shape: non-negative integers, rank <= kMaxRank, product fits in int64.
Result<Shape> ParseShape(const Json& j, std::string_view what);
// Chunk dims >= 1, rank == shape rank, chunk bytes <= kMaxChunkBytes.
Status ValidateChunkShape(const Shape& chunk, const Shape& shape, DType dtype,
                          std::string_view what);
Json ChunkKeyEncodingToJson(const ChunkKeyEncoding& e);

// zarr v2 `.zarray`. With !allow_extra_members unknown members are
// InvalidArgument (creating), else preserved (opening).
Result<ArrayMetadata> ParseV2(const Json& j, bool allow_extra_members = true);
Json V2ToJson(const ArrayMetadata& m);
// Fills TensorStore's defaults into a partial `.zarray` document.
Result<Json> CompleteV2(const Json& partial);

}  // namespace cairn::internal_zarr
