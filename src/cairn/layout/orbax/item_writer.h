// Writing one Orbax PyTree item directory, as one of N processes.
//
// Storage variants: OCDBT + Zarr v3, OCDBT + Zarr v2, and one directory per
// array with Zarr v3 or v2 (`use_ocdbt` / `use_zarr3`).
//
// Protocol (each numbered step finishes before the next starts):
//   1. Every process i calls WriteItemShards: it encodes the chunks of the
//      shards it owns and writes them, in OCDBT mode into its own database
//      `ocdbt.process_<i>/` (data files before its manifest), otherwise as
//      chunk files `<param>/<chunk key>`; the primary also writes each
//      array's Zarr metadata (into its own database / directory). Then it
//      writes `array_metadatas/process_<i>`.
//   2. (barrier: every process has finished step 1)
//   3. The primary calls FinalizeItem: it checks that all processes reported
//      the same arrays, writes `_strings.json`, `_sharding`, then
//      `_METADATA`, and in OCDBT mode builds the root database
//      (`manifest.ocdbt` + `d/`) that refers to every process's keys. The
//      root manifest is written last: before it exists Orbax finds no data.
//   4. The caller commits the directory (step.h: commit_success.txt, rename).
//
// Thread safety: functions are independent; processes write disjoint files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/tree_metadata.h"
#include "cairn/util/box.h"
#include "cairn/util/json.h"

namespace cairn::orbax {

// A box of an array held by the caller: C-contiguous, native-endian
// elements of box.shape.
struct ArrayShard {
  Box box;
  const void* data = nullptr;
};

struct LeafToWrite {
  KeyPath path;
  std::string value_type;  // tree_metadata.h value types
  // Array leaves (jax.Array, np.ndarray, scalar):
  DType dtype = DType::kFloat32;
  Shape shape;
  Shape write_shape;             // empty: the whole shape
  Shape chunk_shape;             // empty: chosen by ChooseChunkShape
  std::vector<ArrayShard> shards;  // what this process writes (may be none)
  std::optional<std::string> random_key_impl;
  std::optional<std::string> sharding_json;  // goes to `_sharding`
  // String leaves:
  std::string string_value;
};

struct ItemWriteOptions {
  bool use_ocdbt = true;
  bool use_zarr3 = true;
  int process_index = 0;
  int process_count = 1;
  // Processes first_process_index .. process_count-1 wrote the item (> 0 for
  // a process-local item, as every host writes its own in Orbax's emergency
  // local tier).
  int first_process_index = 0;
  // Non-empty: the processes that wrote the item by name, in place of
  // first_process_index..process_count-1 (a Pathways colocated save: the
  // hosts "0", "1", ... and the controller "pwcontroller"). Every name's
  // database is merged; a name of digits is a host and must have written
  // `array_metadatas/process_<name>`, the others (as Orbax's controller,
  // which saves no jax.Array) write none.
  std::vector<std::string> process_names;
  int primary_process = 0;
  // OCDBT target data file size; chunks larger than this are split. 0 = no
  // limit. Orbax: 2 GiB for local paths.
  uint64_t target_data_file_size = uint64_t{1} << 31;
  // Upper bound on chunk bytes (Orbax's SaveArgs.chunk_byte_size); 0 = none.
  uint64_t chunk_byte_size = 0;
  Json custom_metadata;  // `_METADATA` custom_metadata (null by default)
  // Bytes of encoded chunks staged in memory before an OCDBT commit.
  uint64_t flush_bytes = uint64_t{256} << 20;
  bool is_primary() const { return process_index == primary_process; }
};

// Orbax's chunking rule: the write shape, split (each dimension to a
// divisor of itself, the largest dimension first) until a chunk holds at
// most `max_bytes` (0 = no limit). Zero-size dimensions count as 1.
Shape ChooseChunkShape(const Shape& write_shape, size_t item_size, uint64_t max_bytes);

// The tree metadata entries for `leaves` (write_shape only for jax.Array).
std::vector<TreeEntry> TreeEntriesFor(const std::vector<LeafToWrite>& leaves);

// The partial zarr metadata (v3 `zarr.json` or v2 `.zarray` fields) of an
// array as Orbax writes it: v3 a `sharding_indexed` shard per chunk with
// zstd level 3 inside and a crc32c index; v2 zstd level 1; both with the
// zstd content checksum (v2 stores the `.zarray` without the `checksum`
// member, which TensorStore rejects). `compress` false leaves zstd out.
Json OrbaxArrayMetadata(DType dtype, const Shape& shape, const Shape& chunk, bool zarr3,
                        bool compress);

// Step 1. `item` is the (pending) item location (PendingCommit::location of
// step.h): every key is written below it, through its store only.
// Checks the leaves first: InvalidArgument for param name collisions, a
// shard outside its array, a write shape that does not match the shape's rank.
Status WriteItemShards(const Location& item, const std::vector<LeafToWrite>& leaves,
                       const ItemWriteOptions& options);

// Step 3, on the primary only, after every process finished step 1.
Status FinalizeItem(const Location& item, const std::vector<LeafToWrite>& leaves,
                    const ItemWriteOptions& options);

}  // namespace cairn::orbax
