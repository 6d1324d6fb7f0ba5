// The front door's option parsers: every caller (the public API, the CLI,
// the Python bindings) turns a user's option into the engine's through these
// functions, so a spelling accepted by one is accepted by all.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "cairn/engine.h"
#include "cairn/engine/save_request.h"

namespace cairn::api {

// "default" or "zstd" (Orbax's zstd settings), "none", "auto" (zstd only
// where a sample shrinks by about 10% or more).
// Errors: InvalidArgument naming the value and the accepted names.
Result<engine::Compression> ParseCompression(std::string_view name);

// The engine's save options for the public ones (every field, so that no
// path leaves one out). Errors: InvalidArgument for a bad compression name
// or custom metadata that is not JSON.
Result<engine::SaveOptions> EngineSaveOptions(const SaveCheckpointOptions& options);

}  // namespace cairn::api
