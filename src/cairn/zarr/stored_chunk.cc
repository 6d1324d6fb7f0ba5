#include "cairn/zarr/stored_chunk.h"

#include <vector>

#include <zstd.h>

#include "cairn/codec/sharding_codec.h"
#include "cairn/zarr/shard_io.h"

namespace cairn {
namespace {

// "zstd" or "raw" for a chain [bytes (native order)] [zstd]?, else "".
std::string ChainForm(const CodecChain& chain, const ChunkSpec& spec) {
  if (!chain.array_codecs().empty() || chain.array_to_bytes() == nullptr ||
      !chain.array_to_bytes()->IsIdentity(spec)) {
    return "";
  }
  if (chain.bytes_codecs().empty()) return "raw";
  if (chain.bytes_codecs().size() == 1 && chain.bytes_codecs()[0]->name() == "zstd") return "zstd";
  return "";
}

std::string ShapeText(const Shape& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

// The grid cell of `box` when it is exactly one chunk wholly inside the
// array.
std::optional<std::vector<Index>> WholeCell(const ArrayMetadata& m, const Box& box) {
  if (box.rank() != m.shape.size() || m.chunk_shape.size() != m.shape.size()) return std::nullopt;
  std::vector<Index> cell(box.rank());
  for (size_t d = 0; d < box.rank(); ++d) {
    const Index c = m.chunk_shape[d];
    if (c <= 0 || box.shape[d] != c || box.origin[d] < 0 || box.origin[d] % c != 0 ||
        box.origin[d] + c > m.shape[d]) {
      return std::nullopt;
    }
    cell[d] = box.origin[d] / c;
  }
  return cell;
}

// The cheap checks of stored bytes passed along undecoded: raw bytes are
// the chunk's size; a zstd chunk is exactly one frame that declares the
// chunk's size (as TensorStore's and cairn's writers make them). A chunk
// that fails them is decoded instead, where its damage is reported.
bool LooksWhole(ByteView stored, bool zstd, size_t chunk_bytes) {
  if (!zstd) return stored.size() == chunk_bytes;
  if (ZSTD_getFrameContentSize(stored.data(), stored.size()) != chunk_bytes) return false;
  return ZSTD_findFrameCompressedSize(stored.data(), stored.size()) == stored.size();
}

}  // namespace

std::string StoredChunkForm(const ArrayMetadata& m) {
  const ChunkSpec spec = m.chunk_spec();
  std::string form;
  if (const ShardingCodec* sharding = internal_zarr::TopLevelSharding(m.codecs)) {
    const ChunkSpec inner = sharding->InnerSpec(spec);
    if (inner.shape != spec.shape) return "";
    form = ChainForm(sharding->inner_codecs(), inner);
  } else {
    form = ChainForm(m.codecs, spec);
  }
  if (form.empty()) return "";
  return form + " " + std::string(DTypeName(m.dtype)) + " " + ShapeText(m.chunk_shape);
}

Result<std::optional<StoredChunk>> ReadStoredChunk(const ZarrArray& array, const Box& box) {
  const ArrayMetadata& m = array.metadata();
  const std::optional<std::vector<Index>> cell = WholeCell(m, box);
  const std::string form = StoredChunkForm(m);
  if (!cell || form.empty()) return std::optional<StoredChunk>();
  const bool zstd = form.compare(0, 5, "zstd ") == 0;
  const std::string key = array.prefix() + array.ChunkKey(*cell);
  KvStore& store = *array.shared_store();
  const std::string where = "reading " + store.Describe(key);
  auto got = store.Get(key);
  if (!got.ok()) return got.status().Annotate(where);
  if (!*got) return std::optional<StoredChunk>();
  StoredChunk chunk;
  chunk.size = (*got)->size();
  chunk.bytes = std::move(**got);
  const ShardingCodec* sharding = internal_zarr::TopLevelSharding(m.codecs);
  if (sharding == nullptr) {
    if (!LooksWhole(chunk.view(), zstd, m.chunk_spec().num_bytes())) return std::optional<StoredChunk>();
    return std::optional<StoredChunk>(std::move(chunk));
  }
  // A shard of one inner chunk: that chunk's bytes, where its index says.
  const ChunkSpec spec = m.chunk_spec();
  auto index_bytes = sharding->IndexBytes(spec, chunk.bytes);
  if (!index_bytes.ok()) return index_bytes.status().Annotate(where);
  auto entries = sharding->DecodeIndex(spec, *index_bytes);
  if (!entries.ok()) return entries.status().Annotate(where);
  CAIRN_RETURN_IF_ERROR(ValidateShardIndex(*entries, chunk.bytes.size()).Annotate(where));
  if (entries->size() != 1 || (*entries)[0].missing()) return std::optional<StoredChunk>();
  chunk.offset = static_cast<size_t>((*entries)[0].offset);
  chunk.size = static_cast<size_t>((*entries)[0].nbytes);
  if (!LooksWhole(chunk.view(), zstd, spec.num_bytes())) return std::optional<StoredChunk>();
  return std::optional<StoredChunk>(std::move(chunk));
}

Status WriteStoredChunk(const ZarrArray& array, const Box& box, ByteView stored) {
  const ArrayMetadata& m = array.metadata();
  const std::optional<std::vector<Index>> cell = WholeCell(m, box);
  if (!cell || StoredChunkForm(m).empty() || internal_zarr::TopLevelSharding(m.codecs) != nullptr) {
    return InvalidArgumentError("box " + box.ToString() + " of " + array.store().url() +
                                array.prefix() + " cannot take a stored chunk as it is");
  }
  const std::string key = array.prefix() + array.ChunkKey(*cell);
  KvStore& store = *array.shared_store();
  return store.Put(key, stored).Annotate("writing " + store.Describe(key));
}

}  // namespace cairn
