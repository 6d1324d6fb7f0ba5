#include "cairn/zarr/array.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "cairn/kvstore/read_batching.h"
#include "cairn/util/thread_pool.h"
#include "cairn/zarr/shard_io.h"

namespace cairn {

using internal_zarr::CellRange;
using internal_zarr::FillStrided;
using internal_zarr::IsCContiguous;
using internal_zarr::NextCell;
using internal_zarr::Offset;
using internal_zarr::TopLevelSharding;

namespace {

Status CheckPrefix(const std::string& prefix) {
  if (!prefix.empty() && prefix.back() != '/') {
    return InvalidArgumentError("array prefix \"" + prefix + "\" must be empty or end with '/'");
  }
  return Status::OK();
}

// Threads for chunk jobs that mostly wait on a remote store.
constexpr size_t kMaxIoWorkers = 128;
ThreadPool& IoPool() {
  static ThreadPool* pool = new ThreadPool(kMaxIoWorkers);  // never destroyed, as Default()
  return *pool;
}

// Runs `fn` for every cell of the grid [lo, hi] on the default pool, with
// at most (pool size + 1) cells in flight, or, when the store serves more
// requests at once than that (`io_concurrency`, KvStore::io_concurrency:
// object stores), that many (at most kMaxIoWorkers) on the I/O pool;
// returns the first error.
template <typename Fn>
Status ForEachCell(const std::vector<Index>& lo, const std::vector<Index>& hi,
                   size_t io_concurrency, const Fn& fn) {
  Index count = 1;
  for (size_t d = 0; d < lo.size(); ++d) count *= hi[d] - lo[d] + 1;
  if (count == 1) {
    // On the caller's thread; an exception (bad_alloc) becomes a Status as
    // it would in a task group.
    return RunCatchingExceptions([&] { return fn(std::span<const Index>(lo)); });
  }
  const bool io_bound = io_concurrency > ThreadPool::Default().size() + 1;
  ThreadPool& pool = io_bound ? IoPool() : ThreadPool::Default();
  TaskGroup group(pool);
  std::mutex mu;
  std::vector<Index> next = lo;
  bool done = false;
  auto worker = [&]() -> Status {
    std::vector<Index> cell;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (done || group.failed()) return Status::OK();
        cell = next;
        done = !NextCell(next, lo, hi);
      }
      CAIRN_RETURN_IF_ERROR(fn(std::span<const Index>(cell)));
    }
  };
  const Index workers = std::min<Index>(
      count, io_bound ? static_cast<Index>(std::min(io_concurrency, kMaxIoWorkers))
                      : static_cast<Index>(pool.size()) + 1);
  for (Index i = 0; i < workers; ++i) group.Run(worker);
  return group.Wait();
}

Box CellBox(std::span<const Index> cell, const Shape& chunk_shape) {
  Box b;
  for (size_t d = 0; d < cell.size(); ++d) {
    b.origin.push_back(cell[d] * chunk_shape[d]);
    b.shape.push_back(chunk_shape[d]);
  }
  return b;
}

// `box` relative to `origin`.
Box Relative(const Box& box, const std::vector<Index>& origin) {
  Box r = box;
  for (size_t d = 0; d < box.rank(); ++d) r.origin[d] -= origin[d];
  return r;
}

// Copies or decodes the stored bytes of the chunk at `cell` (nullopt: the
// chunk is missing, so its part is filled) into the part of `box` it covers.
Status PlaceChunk(const ArrayMetadata& m, std::span<const Index> cell, const Box& box,
                  uint8_t* dst, std::span<const Index> dst_strides,
                  std::optional<ByteView> stored) {
  const size_t elem = DTypeSize(m.dtype);
  const Box chunk_box = CellBox(cell, m.chunk_shape);
  const Box inter = Intersect(chunk_box, box);
  uint8_t* out = Offset(dst, inter.origin, box.origin, dst_strides);
  const ChunkSpec spec = m.chunk_spec();
  if (!stored) {
    FillStrided(out, dst_strides, inter.shape, m.fill_value);
    return Status::OK();
  }
  if (inter == chunk_box && IsCContiguous(dst_strides, inter.shape, elem)) {
    // A whole chunk laid out as the destination: decode straight into it.
    return m.codecs.DecodeInto(spec, *stored, MutableByteView(out, spec.num_bytes()));
  }
  Buffer decoded;
  const uint8_t* chunk = stored->data();
  if (m.codecs.IsIdentity(spec)) {
    if (stored->size() != spec.num_bytes()) {
      return DataLossError("chunk has " + std::to_string(stored->size()) + " bytes, expected " +
                           std::to_string(spec.num_bytes()));
    }
  } else {
    CAIRN_ASSIGN_OR_RETURN(decoded, m.codecs.Decode(spec, *stored));
    if (decoded.size() != spec.num_bytes()) {
      return DataLossError("chunk decoded to " + std::to_string(decoded.size()) +
                           " bytes, expected " + std::to_string(spec.num_bytes()));
    }
    chunk = decoded.data();
  }
  const std::vector<Index> chunk_strides = CStrides(m.chunk_shape, elem);
  const uint8_t* src = Offset(const_cast<uint8_t*>(chunk), inter.origin, chunk_box.origin,
                              chunk_strides);
  StridedCopy(src, chunk_strides, out, dst_strides, inter.shape, elem);
  return Status::OK();
}

// Reads the chunks of cells [lo, hi] with one GetMany of `store` (unsharded
// arrays), placing each into `dst` as it arrives.
Status ReadBatched(const ZarrArray& array, KvStore& store, const std::string& prefix,
                   const std::vector<Index>& lo, const std::vector<Index>& hi, const Box& box,
                   uint8_t* dst, std::span<const Index> dst_strides) {
  std::vector<std::vector<Index>> cells;
  std::vector<KeyRead> reads;
  std::vector<Index> cell = lo;
  do {
    reads.push_back({prefix + array.ChunkKey(cell), ByteRange::All()});
    cells.push_back(cell);
  } while (NextCell(cell, lo, hi));
  return store.GetMany(reads, [&](size_t i, std::optional<ByteView> value) {
    return PlaceChunk(array.metadata(), cells[i], box, dst, dst_strides, value)
        .Annotate("reading " + store.Describe(reads[i].key));
  });
}

}  // namespace

Result<std::shared_ptr<ZarrArray>> ZarrArray::Open(std::shared_ptr<KvStore> store,
                                                   std::string prefix,
                                                   std::optional<ZarrFormat> format) {
  OpenOptions options;
  options.format = format;
  return Open(std::move(store), std::move(prefix), options);
}

Result<std::shared_ptr<ZarrArray>> ZarrArray::Open(std::shared_ptr<KvStore> store,
                                                   std::string prefix,
                                                   const OpenOptions& options) {
  CAIRN_RETURN_IF_ERROR(CheckPrefix(prefix));
  std::vector<ZarrFormat> formats = {ZarrFormat::kV3, ZarrFormat::kV2};
  if (options.format) formats = {*options.format};
  for (ZarrFormat f : formats) {
    const std::string key = prefix + MetadataKey(f);
    const std::string where = "reading " + store->Describe(key);
    auto got = store->Get(key);
    if (!got.ok()) return got.status().Annotate(where);
    if (!*got) continue;
    auto json = ParseJson((*got)->as_string_view(), "array metadata");
    if (!json.ok()) return json.status().Annotate(where);
    auto metadata = ParseArrayMetadata(f, *json);
    if (!metadata.ok()) return metadata.status().Annotate(where);
    return std::shared_ptr<ZarrArray>(
        new ZarrArray(std::move(store), std::move(prefix),
                      std::make_shared<const ArrayMetadata>(*std::move(metadata)),
                      options.store_data_equal_to_fill_value));
  }
  std::string keys = "`" + prefix + MetadataKey(formats[0]) + "`";
  if (formats.size() > 1) keys += " or `" + prefix + MetadataKey(formats[1]) + "`";
  return NotFoundError("no zarr array at " + store->url() + ": neither " + keys + " exists");
}

Result<std::shared_ptr<ZarrArray>> ZarrArray::Create(std::shared_ptr<KvStore> store,
                                                     std::string prefix, ZarrFormat format,
                                                     const Json& metadata,
                                                     const CreateOptions& options) {
  CAIRN_RETURN_IF_ERROR(CheckPrefix(prefix));
  const std::string key = prefix + MetadataKey(format);
  const std::string where = "creating " + store->Describe(key);
  auto m = MetadataFromPartial(format, metadata);
  if (!m.ok()) return m.status().Annotate(where);
  const std::string text = m->ToJsonString();
  if (options.overwrite) {
    CAIRN_RETURN_IF_ERROR(store->Put(key, AsBytes(text)).Annotate(where));
  } else {
    auto stored = store->PutIfAbsent(key, AsBytes(text));
    if (!stored.ok()) return stored.status().Annotate(where);
    if (!*stored) return AlreadyExistsError(where + ": an array already exists there");
  }
  return std::shared_ptr<ZarrArray>(
      new ZarrArray(std::move(store), std::move(prefix),
                    std::make_shared<const ArrayMetadata>(*std::move(m)),
                    options.store_data_equal_to_fill_value));
}

std::string ZarrArray::ChunkKey(std::span<const Index> cell) const {
  return metadata_->chunk_key_encoding.FormatKey(cell);
}

Status ZarrArray::CheckBox(const Box& box, const StridedLayout& layout) const {
  const Shape& shape = metadata_->shape;
  bool ok = box.rank() == shape.size() && box.origin.size() == shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = box.origin[d] >= 0 && box.shape[d] >= 0 && box.origin[d] <= shape[d] - box.shape[d];
  }
  if (!ok) {
    return InvalidArgumentError("box " + box.ToString() + " is not within the array's domain " +
                                Box::FromShape(shape).ToString() + " at " + store_->url() +
                                prefix_);
  }
  if (!layout.byte_strides.empty() && layout.byte_strides.size() != shape.size()) {
    return InvalidArgumentError("layout has " + std::to_string(layout.byte_strides.size()) +
                                " strides for a rank-" + std::to_string(shape.size()) + " box");
  }
  return Status::OK();
}

Status ZarrArray::LoadChunk(const std::string& key, Buffer& chunk) const {
  const ChunkSpec spec = metadata_->chunk_spec();
  const size_t nbytes = spec.num_bytes();
  CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> stored, store_->Get(key));
  if (!stored) {
    CAIRN_RETURN_IF_ERROR(chunk.TryResize(nbytes, "a chunk filled with the fill value"));
    FillWithElement(chunk.data(), nbytes / spec.fill_value.size(), spec.fill_value.data(),
                    spec.fill_value.size());
    return Status::OK();
  }
  return DecodeChunk(std::move(*stored), chunk);
}

Status ZarrArray::DecodeChunk(Buffer stored, Buffer& chunk) const {
  const ChunkSpec spec = metadata_->chunk_spec();
  const size_t nbytes = spec.num_bytes();
  if (metadata_->codecs.IsIdentity(spec)) {
    if (stored.size() != nbytes) {
      return DataLossError("chunk has " + std::to_string(stored.size()) + " bytes, expected " +
                           std::to_string(nbytes));
    }
    chunk = std::move(stored);
    return Status::OK();
  }
  CAIRN_ASSIGN_OR_RETURN(chunk, metadata_->codecs.Decode(spec, stored));
  if (chunk.size() != nbytes) {
    return DataLossError("chunk decoded to " + std::to_string(chunk.size()) +
                         " bytes, expected " + std::to_string(nbytes));
  }
  return Status::OK();
}

Status ZarrArray::ReadChunk(std::span<const Index> cell, const Box& box, uint8_t* dst,
                            std::span<const Index> dst_strides) const {
  const ArrayMetadata& m = *metadata_;
  const size_t elem = DTypeSize(m.dtype);
  const Box chunk_box = CellBox(cell, m.chunk_shape);
  const Box inter = Intersect(chunk_box, box);
  uint8_t* out = Offset(dst, inter.origin, box.origin, dst_strides);
  const std::string key = prefix_ + ChunkKey(cell);
  const std::string where = "reading " + store_->Describe(key);
  const ChunkSpec spec = m.chunk_spec();
  if (const auto* sharding = TopLevelSharding(m.codecs)) {
    const Box valid = Intersect(chunk_box, Box::FromShape(m.shape));
    return internal_zarr::ReadShardRegion(*store_, key, *sharding, spec, chunk_box, valid, inter,
                                          out, dst_strides)
        .Annotate(where);
  }
  const bool in_place = inter == chunk_box && IsCContiguous(dst_strides, inter.shape, elem);
  if (in_place && m.codecs.IsIdentity(spec)) {
    // The stored bytes are the chunk: read them straight into place.
    auto found = store_->GetInto(key, MutableByteView(out, spec.num_bytes()));
    if (!found.ok()) return found.status().Annotate(where);
    if (!*found) FillStrided(out, dst_strides, inter.shape, m.fill_value);
    return Status::OK();
  }
  // Part of a chunk, or a chunk that must be decoded. A missing chunk fills
  // the region in place: materialising it could take up to kMaxChunkBytes
  // per worker for a read of a few elements.
  auto stored = store_->Get(key);
  if (!stored.ok()) return stored.status().Annotate(where);
  return PlaceChunk(m, cell, box, dst, dst_strides,
                    *stored ? std::optional<ByteView>((*stored)->view()) : std::nullopt)
      .Annotate(where);
}

Status ZarrArray::WriteChunk(std::span<const Index> cell, const Box& box, const uint8_t* src,
                             std::span<const Index> src_strides, KvBatchWriter* batch) const {
  const ArrayMetadata& m = *metadata_;
  const size_t elem = DTypeSize(m.dtype);
  const ChunkSpec spec = m.chunk_spec();
  const Box chunk_box = CellBox(cell, m.chunk_shape);
  const Box inter = Intersect(chunk_box, box);
  const Box valid = Intersect(chunk_box, Box::FromShape(m.shape));
  const uint8_t* in = Offset(const_cast<uint8_t*>(src), inter.origin, box.origin, src_strides);
  const std::string key = prefix_ + ChunkKey(cell);
  const std::string where = "writing " + store_->Describe(key);
  const bool store_fill = store_fill_ || m.fill_value_is_null;
  const bool identity = m.codecs.IsIdentity(spec);
  auto put = [&](ByteView value) {
    return (batch != nullptr ? batch->Add(key, value) : store_->Put(key, value)).Annotate(where);
  };
  auto remove = [&] {
    return (batch != nullptr ? batch->Delete(key) : store_->Delete(key)).Annotate(where);
  };

  if (identity && inter == chunk_box && IsCContiguous(src_strides, inter.shape, elem)) {
    // Whole chunk from a contiguous source: store the caller's bytes as is.
    const ByteView view(in, spec.num_bytes());
    if (!store_fill && IsFillValue(spec, view)) return remove();
    return put(view);
  }
  Buffer chunk;
  if (inter == valid) {
    CAIRN_RETURN_IF_ERROR(chunk.TryResize(spec.num_bytes(), "the chunk").Annotate(where));
    if (inter != chunk_box) {
      FillWithElement(chunk.data(), spec.num_bytes() / elem, m.fill_value.data(), elem);
    }
  } else {
    CAIRN_RETURN_IF_ERROR(LoadChunk(key, chunk).Annotate(where));
  }
  const std::vector<Index> chunk_strides = CStrides(m.chunk_shape, elem);
  StridedCopy(in, src_strides, Offset(chunk.data(), inter.origin, chunk_box.origin, chunk_strides),
              chunk_strides, inter.shape, elem);

  if (const auto* sharding = TopLevelSharding(m.codecs)) {
    auto shard = internal_zarr::EncodeShard(*sharding, spec, chunk,
                                            Relative(valid, chunk_box.origin), store_fill);
    if (!shard.ok()) return shard.status().Annotate(where);
    if (!*shard) return remove();
    return put(**shard);
  }
  if (!store_fill && IsFillValue(spec, chunk)) return remove();
  if (identity) return put(chunk);
  EncodeOptions options;
  options.store_data_equal_to_fill_value = store_fill;
  auto encoded = m.codecs.Encode(spec, chunk, options);
  if (!encoded.ok()) return encoded.status().Annotate(where);
  return put(*encoded);
}

Status ZarrArray::Read(const Box& box, void* dst, const StridedLayout& layout) const {
  CAIRN_RETURN_IF_ERROR(CheckBox(box, layout));
  if (box.empty()) return Status::OK();
  const size_t elem = DTypeSize(metadata_->dtype);
  const std::vector<Index> strides =
      layout.byte_strides.empty() ? CStrides(box.shape, elem) : layout.byte_strides;
  std::vector<Index> lo, hi;
  CellRange(box, metadata_->chunk_shape, lo, hi);
  uint8_t* base = static_cast<uint8_t*>(dst);
  if (TopLevelSharding(metadata_->codecs) == nullptr && PrefersBatchedReads(*store_)) {
    // One batch: OCDBT reads the manifest and walks the tree once for all
    // chunks, instead of once per chunk.
    return ReadBatched(*this, *store_, prefix_, lo, hi, box, base, strides);
  }
  return ForEachCell(lo, hi, store_->io_concurrency(), [&](std::span<const Index> cell) {
    return ReadChunk(cell, box, base, strides);
  });
}

Status ZarrArray::Write(const Box& box, const void* src, const StridedLayout& layout) const {
  CAIRN_RETURN_IF_ERROR(CheckBox(box, layout));
  if (box.empty()) return Status::OK();
  const size_t elem = DTypeSize(metadata_->dtype);
  const std::vector<Index> strides =
      layout.byte_strides.empty() ? CStrides(box.shape, elem) : layout.byte_strides;
  std::vector<Index> lo, hi;
  CellRange(box, metadata_->chunk_shape, lo, hi);
  const uint8_t* base = static_cast<const uint8_t*>(src);
  if (lo == hi) return WriteChunk(lo, box, base, strides);
  std::unique_ptr<KvBatchWriter> batch = NewBatchWriter(store_);
  CAIRN_RETURN_IF_ERROR(ForEachCell(lo, hi, store_->io_concurrency(), [&](std::span<const Index> cell) {
    return WriteChunk(cell, box, base, strides, batch.get());
  }));
  return batch->Commit().Annotate("committing the chunks written to " + store_->url() + prefix_);
}

}  // namespace cairn
