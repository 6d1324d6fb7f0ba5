// ZarrArray::ReadWholeChunk: a whole chunk handed over as decoded, for
// callers that copy chunk for chunk (the converter), so the bytes are not
// copied again from the decoder's buffer into the caller's.
#include "cairn/codec/sharding_codec.h"
#include "cairn/zarr/array.h"
#include "cairn/zarr/shard_io.h"

namespace cairn {

Result<std::optional<Buffer>> ZarrArray::ReadWholeChunk(const Box& box) const {
  const ArrayMetadata& m = *metadata_;
  if (box.rank() != m.shape.size()) return std::optional<Buffer>();
  std::vector<Index> cell(box.rank());
  for (size_t d = 0; d < box.rank(); ++d) {
    const Index c = m.chunk_shape[d];
    if (c <= 0 || box.shape[d] != c || box.origin[d] % c != 0 || box.origin[d] < 0 ||
        box.origin[d] + c > m.shape[d]) {
      return std::optional<Buffer>();
    }
    cell[d] = box.origin[d] / c;
  }
  const std::string key = prefix_ + ChunkKey(cell);
  const std::string where = "reading " + store_->Describe(key);
  const ChunkSpec spec = m.chunk_spec();
  auto stored = store_->Get(key);
  if (!stored.ok()) return stored.status().Annotate(where);
  if (!*stored) return std::optional<Buffer>();  // Read fills it in place
  const ShardingCodec* sharding = internal_zarr::TopLevelSharding(m.codecs);
  if (sharding == nullptr) {
    Buffer chunk;
    CAIRN_RETURN_IF_ERROR(DecodeChunk(std::move(**stored), chunk).Annotate(where));
    return std::optional<Buffer>(std::move(chunk));
  }
  // A shard: handed over only when it is one inner chunk (as Orbax writes
  // them), whose decoded bytes are then the whole shard's.
  const ChunkSpec inner = sharding->InnerSpec(spec);
  if (inner.shape != spec.shape) return std::optional<Buffer>();
  auto index_bytes = sharding->IndexBytes(spec, **stored);
  if (!index_bytes.ok()) return index_bytes.status().Annotate(where);
  auto entries = sharding->DecodeIndex(spec, *index_bytes);
  if (!entries.ok()) return entries.status().Annotate(where);
  CAIRN_RETURN_IF_ERROR(ValidateShardIndex(*entries, (*stored)->size()).Annotate(where));
  if (entries->size() != 1 || (*entries)[0].missing()) return std::optional<Buffer>();
  const ShardIndexEntry& e = (*entries)[0];
  auto decoded = sharding->inner_codecs().Decode(inner, (*stored)->view().subspan(e.offset, e.nbytes));
  if (!decoded.ok()) return decoded.status().Annotate(where + ": inner chunk 0");
  if (decoded->size() != spec.num_bytes()) {
    return DataLossError(where + ": inner chunk decoded to " + std::to_string(decoded->size()) +
                         " bytes, expected " + std::to_string(spec.num_bytes()));
  }
  return std::optional<Buffer>(std::move(*decoded));
}

}  // namespace cairn
