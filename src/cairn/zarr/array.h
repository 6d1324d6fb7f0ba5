// ZarrArray: a Zarr v2 or v3 array stored in a KvStore under a key prefix,
// read and written exactly as TensorStore's `zarr`/`zarr3` drivers do.
//
// Element buffers passed to Read/Write are native-endian elements of the
// array's dtype. A chunk that is missing from the store reads as the fill
// value. Writes of part of a chunk read, modify and rewrite the chunk.
// Chunks (or shards) are encoded and decoded on the thread pool, many at once.
//
// Thread safety: Read/Write may be called concurrently; concurrent writes
// touching the same chunk race (last writer wins per chunk), as in TensorStore
// without transactions.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cairn/kvstore/batch_writer.h"
#include "cairn/kvstore/kvstore.h"
#include "cairn/util/box.h"
#include "cairn/util/json.h"
#include "cairn/zarr/metadata.h"

namespace cairn {

// Where the elements of a Read/Write buffer live: a base pointer and one
// byte stride per dimension of the box (C order when strides are empty).
struct StridedLayout {
  std::vector<Index> byte_strides;  // empty = C-contiguous
};

struct CreateOptions {
  // Replace an existing array's metadata (chunks are not deleted).
  bool overwrite = false;
  // Store chunks (and inner chunks of shards) equal entirely to the fill
  // value instead of deleting them (TensorStore's option; Orbax sets it).
  bool store_data_equal_to_fill_value = false;
};

struct OpenOptions {
  // With `format` unset, v3 is tried first, then v2.
  std::optional<ZarrFormat> format;
  bool store_data_equal_to_fill_value = false;  // as in CreateOptions
};

class ZarrArray {
 public:
  // Opens the array whose metadata is at `prefix` + "zarr.json" (v3) or
  // `prefix` + ".zarray" (v2). With `format` unset, v3 is tried first.
  // `prefix` is "" or ends with '/'. NotFound if neither exists;
  // InvalidArgument for metadata cairn cannot read, naming the key.
  static Result<std::shared_ptr<ZarrArray>> Open(std::shared_ptr<KvStore> store,
                                                 std::string prefix,
                                                 std::optional<ZarrFormat> format = std::nullopt);
  static Result<std::shared_ptr<ZarrArray>> Open(std::shared_ptr<KvStore> store,
                                                 std::string prefix, const OpenOptions& options);

  // Creates an array from full or partial metadata in the format's own JSON
  // (fields of zarr.json or .zarray); missing fields take TensorStore's
  // defaults (metadata.h). Writes the metadata document. AlreadyExists if an
  // array is there and !options.overwrite.
  static Result<std::shared_ptr<ZarrArray>> Create(std::shared_ptr<KvStore> store,
                                                   std::string prefix, ZarrFormat format,
                                                   const Json& metadata,
                                                   const CreateOptions& options = {});

  const ArrayMetadata& metadata() const { return *metadata_; }
  DType dtype() const { return metadata_->dtype; }
  const Shape& shape() const { return metadata_->shape; }
  const KvStore& store() const { return *store_; }
  // The store itself, for listing the array's keys (zarr/stored_chunks.h).
  const std::shared_ptr<KvStore>& shared_store() const { return store_; }
  const std::string& prefix() const { return prefix_; }

  bool store_data_equal_to_fill_value() const { return store_fill_; }

  // Reads `box` (within the array's shape, else InvalidArgument) into `dst`,
  // laid out as `layout` over box.shape. REQUIRES: dst large enough.
  // Missing chunks read as the fill value, written straight into `dst`
  // (a missing chunk is never materialised). For an array sharded with a
  // top-level `sharding_indexed` codec, a box covering only part of a shard
  // fetches the shard index and then only the inner chunks it needs.
  // Errors (DataLoss for corrupt chunks, Unavailable from the store) name
  // the chunk key: "reading key `c/0/1` of memory://: ...".
  Status Read(const Box& box, void* dst, const StridedLayout& layout = {}) const;

  // When `box` is exactly one chunk of the grid, wholly inside the array,
  // reads that chunk and hands over the decoded buffer itself (C order over
  // the chunk shape): no copy into a caller's buffer, for callers that
  // pass whole chunks along (the converter). nullopt when that cannot be
  // done without a copy: `box` is not one whole chunk, the chunk is
  // missing, or it is a shard of several inner chunks; the caller then uses
  // Read. Errors as Read's (zarr/array_whole_chunk.cc).
  Result<std::optional<Buffer>> ReadWholeChunk(const Box& box) const;

  // Writes `src` (laid out as `layout` over box.shape) to `box`. Chunks only
  // partly covered are read, modified and rewritten. A chunk (or shard)
  // equal entirely to the fill value is deleted instead of stored unless
  // store_data_equal_to_fill_value (v2 arrays with a null fill value store
  // every chunk, as TensorStore does). Stored chunks have the full chunk
  // shape, padded with the fill value at the array's edge. A write of many
  // chunks goes through one KvBatchWriter (kvstore/batch_writer.h), so a
  // store that commits batches atomically (OCDBT) makes one commit for the
  // whole write, visible at once when Write returns OK.
  Status Write(const Box& box, const void* src, const StridedLayout& layout = {}) const;

  // The key of the stored chunk (or shard) at grid position `cell`.
  std::string ChunkKey(std::span<const Index> cell) const;

 private:
  ZarrArray(std::shared_ptr<KvStore> store, std::string prefix,
            std::shared_ptr<const ArrayMetadata> metadata, bool store_fill)
      : store_(std::move(store)),
        prefix_(std::move(prefix)),
        metadata_(std::move(metadata)),
        store_fill_(store_fill) {}

  Status CheckBox(const Box& box, const StridedLayout& layout) const;
  Status ReadChunk(std::span<const Index> cell, const Box& box, uint8_t* dst,
                   std::span<const Index> dst_strides) const;
  // Stores (or deletes) the chunk through `batch`, or the store when null.
  Status WriteChunk(std::span<const Index> cell, const Box& box, const uint8_t* src,
                    std::span<const Index> src_strides, KvBatchWriter* batch = nullptr) const;
  // Decodes the stored chunk at `key` into `chunk` (chunk_spec() layout),
  // or fills it when the key is missing (ResourceExhausted if the chunk
  // cannot be allocated).
  Status LoadChunk(const std::string& key, Buffer& chunk) const;
  // Decodes the stored bytes of a chunk into `chunk` (chunk_spec() layout).
  Status DecodeChunk(Buffer stored, Buffer& chunk) const;

  std::shared_ptr<KvStore> store_;
  std::string prefix_;
  std::shared_ptr<const ArrayMetadata> metadata_;
  bool store_fill_ = false;
};

}  // namespace cairn
