// Builds the manifest of a new generation (TensorStore's
// create_new_manifest): inline versions of the current leaf block, and when
// a block fills up, new version-tree nodes appended to a DataFileWriter.
//
// Thread safety: stateless; as thread-safe as `read`.
#pragma once

#include <optional>

#include "cairn/kvstore/ocdbt/format/manifest.h"
#include "cairn/kvstore/ocdbt/io/data_file_writer.h"
#include "cairn/kvstore/ocdbt/io/reader.h"

namespace cairn::ocdbt {

// Returns the manifest after appending `version` to `old` (nullopt = new
// database with `config`). REQUIRES: version.generation_number ==
// old->latest_generation() + 1 (1 for a new database). Errors: those of
// `read` and of decoding old version-tree nodes.
Result<Manifest> CreateNewManifest(const std::optional<Manifest>& old, const Config& config,
                                   const BtreeGenerationReference& version,
                                   const ReadObjectFn& read, DataFileWriter* out);

}  // namespace cairn::ocdbt
