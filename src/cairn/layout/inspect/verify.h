// `cairn verify`: checks an Orbax checkpoint end to end and lists what is
// broken, naming the array, key and file of each problem.
//
// First, every entry below the location is listed (KvStore::ListChildren,
// which never follows a symlink): a symbolic link, FIFO, socket or device is
// a problem (`not_a_regular_file`), as is nesting deeper than 64 levels
// (`too_deep`); an item holding such an entry is not read further
// (`not_verified`), so nothing can hang or escape the checkpoint.
// Then, for every PyTree item reached from the location (a root: every
// finalized step; a step: its items; an item: itself):
//   1. `_METADATA` is present and parses, with the other metadata files.
//   2. OCDBT items: the root manifest decodes (CRC-32C), every version and
//      B+tree node is read and decoded (CRC-32C), and every data-file
//      reference (nodes and values) lies inside a data file that exists.
//   3. The array's keys are listed once (zarr/stored_chunks.h) and every
//      stored chunk is read and decoded through the codec chain (zstd frame
//      checksums, crc32c codecs, shard index CRCs); when `_METADATA` says
//      data equal to the fill value is stored (Orbax always stores it), a
//      missing chunk or a missing inner chunk of a shard is damage. Missing
//      chunks are never walked one by one: the first
//      `max_problems_per_array` are named, the rest counted and given as
//      row-major ranges in the `more` problem. So the work is bounded by
//      the chunks stored, not by the chunk count the metadata declares.
// Uncommitted `.orbax-checkpoint-tmp` directories (steps, or items inside a
// step) are problems too.
//
// Memory: one stored and one decoded chunk per worker at a time (workers:
// the default thread pool's size).
//
// Thread safety: pure function over the store; the progress callback
// is called from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cairn/layout/orbax/location.h"
#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::inspect {

struct Problem {
  // "not_a_regular_file", "too_deep", "not_verified", "unreadable",
  // "uncommitted", "missing_metadata", "bad_metadata", "ocdbt_manifest",
  // "ocdbt_node", "missing_data_file", "truncated_data_file", "bad_array",
  // "missing_chunk", "missing_inner_chunk", "corrupt_chunk", "more".
  std::string kind;
  std::string array;  // param name, or "" when not about one array
  std::string key;    // key inside the item's store, or ""
  std::string file;   // path of the file concerned (data file, chunk file, directory)
  std::string message;
};

struct VerifyOptions {
  // Called with (decoded bytes checked so far, total) now and then.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Per array, problems beyond this many are summed up in one "more".
  size_t max_problems_per_array = 20;
};

struct VerifyReport {
  std::string path;
  size_t items = 0;
  size_t arrays = 0;
  uint64_t chunks = 0;      // stored chunks (or shards) read
  uint64_t bytes_read = 0;  // stored bytes read
  std::vector<Problem> problems;
  // Not damage: a root's step that was never committed (an interrupted
  // save's temporary directory), which readers and managers ignore.
  std::vector<Problem> warnings;
  bool ok() const { return problems.empty(); }
};

// Verifies the checkpoint at `loc`. Damage is reported in the result;
// the error return is for a location that is no Orbax checkpoint (NotFound).
Result<VerifyReport> VerifyCheckpoint(const orbax::Location& loc, const VerifyOptions& options = {});

}  // namespace cairn::inspect
