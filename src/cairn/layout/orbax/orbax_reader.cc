#include "cairn/layout/orbax/orbax_reader.h"

#include <algorithm>
#include <map>

#include "cairn/codec/sharding_codec.h"
#include "cairn/layout/counting_kvstore.h"
#include "cairn/zarr/shard_io.h"
#include "cairn/zarr/stored_chunk.h"

namespace cairn::orbax {
namespace {

class OrbaxReader final : public layout::CheckpointReader {
 public:
  std::string_view format() const override { return "orbax"; }
  const std::vector<layout::ArrayInfo>& arrays() const override { return arrays_; }

  Status ReadBox(std::string_view path, const Box& box, void* dest) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound,
                    "no array `" + std::string(path) + "` in Orbax item " + item_.dir);
    }
    return it->second->Read(box, dest).Annotate("array `" + std::string(path) + "` of Orbax item " +
                                                item_.dir);
  }

  Result<std::optional<Buffer>> ReadWholeChunk(std::string_view path, const Box& box) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound,
                    "no array `" + std::string(path) + "` in Orbax item " + item_.dir);
    }
    auto got = it->second->ReadWholeChunk(box);
    if (!got.ok()) {
      return got.status().Annotate("array `" + std::string(path) + "` of Orbax item " + item_.dir);
    }
    return got;
  }

  std::optional<uint64_t> StoredBytesRead() const override { return counted_->bytes_read(); }

  std::string StoredChunkForm(std::string_view path) const override {
    auto it = zarr_.find(std::string(path));
    return it == zarr_.end() ? "" : cairn::StoredChunkForm(it->second->metadata());
  }

  Result<std::optional<StoredChunk>> ReadStoredChunk(std::string_view path, const Box& box) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound,
                    "no array `" + std::string(path) + "` in Orbax item " + item_.dir);
    }
    auto got = cairn::ReadStoredChunk(*it->second, box);
    if (!got.ok()) {
      return got.status().Annotate("array `" + std::string(path) + "` of Orbax item " + item_.dir);
    }
    return got;
  }

  OrbaxItem item_;
  std::shared_ptr<layout::CountingKvStore> counted_;  // item_.store, counted
  std::vector<layout::ArrayInfo> arrays_;
  std::map<std::string, std::shared_ptr<ZarrArray>> zarr_;
};

}  // namespace

Result<std::unique_ptr<layout::CheckpointReader>> NewOrbaxReader(OrbaxItem item) {
  auto reader = std::make_unique<OrbaxReader>();
  reader->item_ = std::move(item);
  reader->counted_ = std::make_shared<layout::CountingKvStore>(reader->item_.store);
  reader->item_.store = reader->counted_;
  for (const TreeEntry& e : reader->item_.metadata.entries) {
    if (!IsArrayValueType(e.value.value_type) || e.value.skip_deserialize) continue;
    const std::string param = ParamName(e.path);
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZarrArray> array, OpenItemArray(reader->item_, param));
    const ArrayMetadata& m = array->metadata();
    layout::ArrayInfo info;
    info.path = param;
    info.dtype = m.dtype;
    info.shape = m.shape;
    // The chunk Orbax wrote (write_shape); inside a shard, the shard.
    info.write_shape = e.value.write_shape ? Shape(e.value.write_shape->begin(),
                                                   e.value.write_shape->end())
                                           : m.chunk_shape;
    for (const KeyEntry& k : e.path) info.tree_path.push_back(k.key);
    // Decoded at once: the chunk, or inside a shard its inner chunk.
    const ShardingCodec* sharding = internal_zarr::TopLevelSharding(m.codecs);
    info.read_shape = sharding != nullptr ? sharding->InnerSpec(m.chunk_spec()).shape : m.chunk_shape;
    reader->arrays_.push_back(std::move(info));
    reader->zarr_[param] = std::move(array);
  }
  std::sort(reader->arrays_.begin(), reader->arrays_.end(),
            [](const layout::ArrayInfo& a, const layout::ArrayInfo& b) { return a.path < b.path; });
  return std::unique_ptr<layout::CheckpointReader>(std::move(reader));
}

}  // namespace cairn::orbax
