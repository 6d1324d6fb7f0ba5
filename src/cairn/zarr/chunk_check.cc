#include "cairn/zarr/chunk_check.h"

#include "cairn/codec/sharding_codec.h"
#include "cairn/zarr/shard_io.h"

namespace cairn {

const char* ChunkCheckKindName(ChunkCheck::Kind kind) {
  switch (kind) {
    case ChunkCheck::Kind::kOk: return "";
    case ChunkCheck::Kind::kMissing: return "missing_chunk";
    case ChunkCheck::Kind::kMissingInner: return "missing_inner_chunk";
    case ChunkCheck::Kind::kCorrupt: return "corrupt_chunk";
  }
  return "";
}

ChunkCheck CheckStoredChunk(const ArrayMetadata& md, const std::optional<Buffer>& stored,
                            bool require_all) {
  using Kind = ChunkCheck::Kind;
  if (!stored) {
    if (!require_all) return {};
    return {Kind::kMissing, "chunk is missing; the writer stores every chunk"};
  }
  const Buffer& bytes = *stored;
  const ChunkSpec spec = md.chunk_spec();
  if (md.codecs.IsIdentity(spec)) {
    if (bytes.size() == spec.num_bytes()) return {};
    return {Kind::kCorrupt, "chunk has " + std::to_string(bytes.size()) + " bytes, expected " +
                                std::to_string(spec.num_bytes())};
  }
  auto decoded = md.codecs.Decode(spec, bytes);
  if (!decoded.ok()) return {Kind::kCorrupt, decoded.status().ToString()};
  if (decoded->size() != spec.num_bytes()) {
    return {Kind::kCorrupt, "chunk decoded to " + std::to_string(decoded->size()) +
                                " bytes, expected " + std::to_string(spec.num_bytes())};
  }
  const ShardingCodec* sharding = internal_zarr::TopLevelSharding(md.codecs);
  if (sharding == nullptr || !require_all) return {};
  auto index_bytes = sharding->IndexBytes(spec, bytes);
  if (!index_bytes.ok()) return {Kind::kCorrupt, index_bytes.status().ToString()};
  auto index = sharding->DecodeIndex(spec, *index_bytes);
  if (!index.ok()) return {Kind::kCorrupt, index.status().ToString()};
  size_t missing = 0;
  for (const ShardIndexEntry& e : *index) missing += e.missing() ? 1 : 0;
  if (missing == 0) return {};
  return {Kind::kMissingInner, std::to_string(missing) + " of " + std::to_string(index->size()) +
                                   " inner chunks of the shard are missing"};
}

}  // namespace cairn
