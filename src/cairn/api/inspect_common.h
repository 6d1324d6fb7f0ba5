// What the front door's inspection functions (include/cairn/inspect.h:
// list_api.cc, describe_api.cc, verify_api.cc) share: opening the
// checkpoints read through the checkpoint-format interface, and turning the
// layout's rows into public ones.
#pragma once

#include <optional>
#include <string>

#include "cairn/inspect.h"
#include "cairn/layout/checkpoint_format.h"
#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/open_checkpoint.h"
#include "cairn/util/json.h"

namespace cairn::api {

// The AXLearn or safetensors checkpoint at `address`: nullopt when there is
// none there (an Orbax checkpoint, a zarr pipeline URL, nothing); an error
// when one is there but does not open (a broken AXLearn index: the error
// names the file and what is wrong), so that it is not taken for "no Orbax
// checkpoint".
std::optional<Result<layout::OpenedCheckpoint>> OpenOtherFormat(const std::string& address);

// NotFound naming the path when `address` is a local path or a file:// URL
// (for a pipeline, its first part) where nothing exists; OK otherwise (and
// for every other scheme, whose stores have no empty directories).
Status CheckExists(const std::string& address);

// Why there is no checkpoint at `address`, where Orbax found none
// (`orbax_error`), naming the format the directory looked like:
// InvalidArgument "looks like an AXLearn checkpoint but ..." for AXLearn
// step directories without an index; `orbax_error` when Orbax files are
// there; else NotFound "not a checkpoint: no Orbax, AXLearn or safetensors
// files in <path>".
Status NoCheckpoint(const std::string& address, const Status& orbax_error);

// The public row of an Orbax array.
ArrayListing ToListing(const inspect::ArrayEntry& entry);
// The public row of an array read through the checkpoint-format interface
// (chunks: its write shape).
ArrayListing ToListing(const layout::ArrayInfo& info);
// {"path", "dtype", "shape", "chunks", "bytes"}: a row of `cairn ls --json`
// and of an item's arrays in `cairn info --json`.
Json RowJson(const ArrayListing& row);

// `j` as one line (invalid UTF-8 replaced), the form every ToJson returns.
inline std::string JsonLine(const Json& j) { return DumpJson(j); }

// A JSON text this layer wrote (JsonLine) back as JSON; null for "".
Json FromJsonLine(const std::string& text);

}  // namespace cairn::api
