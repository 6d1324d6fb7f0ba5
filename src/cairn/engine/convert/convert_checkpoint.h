// `cairn convert` and `cairn.convert(...)`: one call that opens the source
// (any format, detected), creates the destination writer of the requested
// format, converts (convert.h), carries AXLearn's non-tensor index entries,
// and verifies when asked. Both front ends make exactly this call.
//
// Thread safety: may be called from any thread.
#pragma once

#include <optional>
#include <string>

#include "cairn/engine/convert/convert.h"
#include "cairn/kvstore/kvstore.h"

namespace cairn::engine {

struct ConvertCheckpointRequest {
  std::string source;  // a path or a kvstore URL (file:///..., memory://...)
  std::string dest;
  std::string to;      // "safetensors" or "axlearn"
  std::string from;    // "" (detect), "safetensors", "axlearn", "orbax"
  std::optional<int64_t> step;  // of the source; AXLearn destinations use it too
  bool overwrite = false;       // replace a committed destination
  uint64_t max_file_bytes = 0;  // safetensors: shard into files of at most this size
  ConvertOptions options;
  // With more than one process, the conversion is split over them
  // (ConvertDistributed); every process makes this call. Not owned.
  Coordinator* coordinator = nullptr;
};

struct ConvertCheckpointResult {
  ConvertStats stats;
  std::string source_format;
  std::string source_location;
  std::string dest_location;
};

// The destination is a directory (prefix): for AXLearn the checkpoint root,
// into which `step_XXXXXXXX/` is written; for safetensors the directory of
// `model.safetensors` (or of the sharded set). A destination that already
// holds a committed checkpoint is AlreadyExists unless `overwrite`.
Result<ConvertCheckpointResult> ConvertCheckpoint(const ConvertCheckpointRequest& request);

// A user's path or URL as a store and a location in it: URLs open their
// store at the URL's path; a plain path opens a file store at the path (at
// its directory, for a path naming a file such as `x.safetensors`).
struct Location {
  std::shared_ptr<KvStore> store;
  std::string prefix;  // "" or a key
};
Result<Location> OpenUserLocation(const std::string& path_or_url);

}  // namespace cairn::engine
