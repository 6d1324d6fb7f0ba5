// One reader/writer interface for checkpoint formats.
//
// Every format cairn reads (Orbax's variants, AXLearn's layouts, safetensors)
// is a CheckpointReader: a list of arrays with their metadata, and any box of
// any array read into a caller's buffer. Every format it writes is a
// CheckpointWriter: arrays declared up front, boxes written, one commit that
// makes the checkpoint visible as its format does (commit marker last). The
// inspect tools and the converter work over these two classes only, so they
// work on every format.
//
// Buffers are dense, C-order (row-major) arrays of the box's shape, native
// endian, one element per DTypeSize(dtype) bytes.
//
// Thread safety: a reader's ReadBox may be called from several threads at
// once; a writer is used by one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/util/box.h"
#include "cairn/util/buffer.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {
class ZarrArray;
struct StoredChunk;  // zarr/stored_chunk.h
}  // namespace cairn

namespace cairn::layout {

struct ArrayInfo {
  std::string path;   // "params.layer0.w" (the format's own naming)
  DType dtype = DType::kFloat32;
  Shape shape;
  // The shape the format stores in one piece: a chunk, or the whole array
  // for formats without chunks (safetensors). Converters copy in units of it.
  Shape write_shape;
  uint64_t stored_bytes = 0;  // bytes on storage, when known (0 = unknown)
  // The keys from the root of the state tree to this array ({"params",
  // "layer0", "w"}), so that converters can name it in another format's
  // convention ('.' for Orbax and safetensors, '/' for AXLearn). Empty when
  // the format has only `path`.
  std::vector<std::string> tree_path;
  // The piece the reader decodes at once to read any part of it: a zarr
  // chunk, or an inner chunk of a shard (a multiple of it makes
  // write_shape). A box cut across one decodes all of it, so a converter
  // that copies in whole multiples of it reads each stored byte once.
  // Empty when a box reads only its own bytes (safetensors) or the format
  // does not say.
  Shape read_shape = {};
};

// Splits a format's path at `separator` into tree keys.
std::vector<std::string> SplitTreePath(std::string_view path, char separator);
// Joins tree keys with `separator`.
std::string JoinTreePath(const std::vector<std::string>& keys, char separator);

// Damage `cairn verify` found in a stored checkpoint.
struct StoredProblem {
  std::string kind;     // "corrupt_chunk", "missing_chunk", "unreadable", ...
  std::string array;    // the array's path
  std::string key;      // the key in the store, when known
  std::string url;      // where: the key's URL, or the checkpoint's
  std::string message;
};

struct VerifyStoredStats {
  size_t arrays = 0;
  uint64_t pieces = 0;  // chunks (or boxes, for formats without chunks) checked
  uint64_t bytes = 0;   // decoded bytes checked
};

class CheckpointReader {
 public:
  virtual ~CheckpointReader() = default;
  // "safetensors", "orbax", "axlearn", ...
  virtual std::string_view format() const = 0;
  // The arrays, sorted by path.
  virtual const std::vector<ArrayInfo>& arrays() const = 0;
  // Reads `box` of array `path` into `dest` (dense, C-order, box-shaped).
  // NotFound for an unknown path, InvalidArgument for a box outside the
  // array, DataLoss for corrupt stored bytes; errors name the array and URL.
  virtual Status ReadBox(std::string_view path, const Box& box, void* dest) = 0;
  // When `box` of array `path` is exactly one stored chunk, wholly inside
  // the array, reads it and hands over the decoder's buffer (dense, C-order,
  // box-shaped), so a caller that passes whole chunks along copies nothing.
  // nullopt when the format cannot do that without a copy (the caller then
  // uses ReadBox); the default always says nullopt. Errors as ReadBox's.
  virtual Result<std::optional<Buffer>> ReadWholeChunk(std::string_view path, const Box& box) {
    (void)path;
    (void)box;
    return std::optional<Buffer>();
  }
  // The stored bytes this reader has read from its store so far (chunks as
  // stored, compressed; metadata read when opening included), so callers
  // can tell how often they made it read the same bytes: take the
  // difference over a piece of work. nullopt when the format does not
  // count.
  virtual std::optional<uint64_t> StoredBytesRead() const { return std::nullopt; }
  // What the stored chunks of array `path` are (zarr/stored_chunk.h's
  // StoredChunkForm): a writer whose array has the same form stores them
  // as they are (CheckpointWriter::WriteStoredChunk), so a converter copies
  // them without decoding. Empty (the default) when they cannot be passed
  // along, or for an unknown path.
  virtual std::string StoredChunkForm(std::string_view path) const {
    (void)path;
    return "";
  }
  // The stored bytes of chunk `box` of array `path` (exactly one chunk,
  // wholly inside the array), not decoded, checked as far as that is cheap
  // (a zstd frame declares the chunk's size). nullopt when that cannot be
  // done (the chunk is missing, or the form is empty); the caller then
  // reads and decodes. Errors as ReadBox's.
  virtual Result<std::optional<StoredChunk>> ReadStoredChunk(std::string_view path, const Box& box);
  // Reads and checks every stored piece of every array, calling `problem`
  // for each damage found (the error return is for failures to list or
  // open, not for damage). Formats of zarr arrays check each chunk with the
  // zarr layer's check (zarr/chunk_check.h), naming its key and URL; the
  // default reads every array through ReadBox, in boxes of at most 64 MiB
  // (safetensors: every byte is in the file, the header is sound).
  // `progress(done, total)` in decoded bytes.
  virtual Result<VerifyStoredStats> VerifyStored(
      const std::function<void(StoredProblem)>& problem,
      const std::function<void(uint64_t, uint64_t)>& progress);
  // The zarr array that stores array `path`, for formats that store arrays
  // as zarr arrays (AXLearn): its stored chunks can be listed
  // (zarr/stored_chunks.h), so that tools bound their work by what is
  // stored. nullptr otherwise, and for an unknown path.
  virtual std::shared_ptr<ZarrArray> ZarrArrayOf(std::string_view path) const {
    (void)path;
    return nullptr;
  }
};

class CheckpointWriter {
 public:
  virtual ~CheckpointWriter() = default;
  virtual std::string_view format() const = 0;
  // Writes `box` of array `path` from `src` (dense, C-order, box-shaped).
  // Boxes that cover whole chunks (multiples of the array's write_shape,
  // clipped at its end) may be written concurrently from several threads;
  // boxes that share a chunk must not be written at the same time.
  // Formats that stream (safetensors) instead require every box in storage
  // order (required_order()), one at a time, and refuse anything else with
  // FailedPrecondition.
  virtual Status WriteBox(std::string_view path, const Box& box, const void* src) = 0;
  // The array paths in the order their bytes must be written, each array
  // front to back in row-major slabs; nullptr when any order will do.
  virtual const std::vector<std::string>* required_order() const { return nullptr; }
  // The form of the stored chunks of array `path` (as the reader's): empty
  // (the default) when the writer takes no stored chunks.
  virtual std::string StoredChunkForm(std::string_view path) const {
    (void)path;
    return "";
  }
  // Stores `stored`, the stored bytes of a chunk of the same form
  // (CheckpointReader::ReadStoredChunk), as chunk `box` of array `path`, as
  // it is. As WriteBox for concurrency. Unimplemented by default.
  virtual Status WriteStoredChunk(std::string_view path, const Box& box, ByteView stored);
  // True when an earlier, interrupted run of the same conversion into this
  // (uncommitted) destination already wrote every chunk of array `path`
  // durably, with the metadata declared now, and each chunk is intact (it
  // passes the zarr layer's chunk check): a resumed conversion skips it.
  // Writers that cannot tell say false (the array is written again).
  virtual Result<bool> ArrayComplete(std::string_view path) {
    (void)path;
    return false;
  }
  // Makes this process's writes durable. In a distributed write every
  // process calls it after its last WriteBox, before one process commits;
  // Commit does it itself when it was not called.
  virtual Status Flush() { return Status::OK(); }
  // Makes the checkpoint visible, durably, as the format does. Until Commit
  // returns OK nothing looks like a valid checkpoint.
  virtual Status Commit() = 0;
};

// Finds `path` in `arrays` (sorted by path), or nullptr.
const ArrayInfo* FindArray(const std::vector<ArrayInfo>& arrays, std::string_view path);

// Checks that `box` lies within an array of `shape`: InvalidArgument naming
// `what` otherwise.
Status CheckBoxInArray(const Box& box, const Shape& shape, std::string_view what);

}  // namespace cairn::layout
