// Saving one Orbax item from a Pathways job with colocated Python: a
// single controller drives hosts that each run a colocated-Python function
// on their own CPU devices (what Orbax 0.12's ColocatedPythonDispatcher
// does, in the same layout: docs/COLOCATED.md).
//
// Protocol (the item directory exists and is committed by the caller,
// SaveRequest::caller_commits; each step finishes before the next starts):
//   1. Every host h, inside the colocated function, runs a shards-only save
//      (SaveOptions::shards_only, process name "<h>" = its jax process
//      index) of the jax.Array leaves with the shards its devices hold:
//      chunks into `ocdbt.process_<h>/` (data files, then its manifest),
//      then `array_metadatas/process_<h>`; host "0" also writes the arrays'
//      Zarr metadata. A single-process coordinator: hosts never talk.
//   2. The controller runs a shards-only save of the numpy and scalar
//      leaves as process "pwcontroller" (`ocdbt.process_pwcontroller/`, with
//      their Zarr metadata, no array metadata file), as Orbax's controller.
//   3. Once every host's function returned (the controller blocks on its
//      result), the controller calls FinalizeColocatedSave with the whole
//      tree and the names that wrote: `_strings.json`, `_sharding`,
//      `_METADATA`, then the root database over every named process
//      database, its manifest last.
//   4. The caller commits the item (Orbax: commit_success.txt / rename).
// Until step 3's root manifest exists no reader finds the item's data.
//
// Thread safety: a plain function.
#pragma once

#include <string>
#include <vector>

#include "cairn/engine/save_request.h"
#include "cairn/status.h"

namespace cairn::engine {

// Step 3. `request` holds every leaf of the tree (shards are ignored),
// `caller_commits` set; `process_names` names the processes that wrote
// (e.g. {"0", "1", "pwcontroller"}; none for a tree of strings alone).
// InvalidArgument without caller_commits; an error naming the file when a host
// lacks its array metadata or two hosts disagree.
Status FinalizeColocatedSave(const SaveRequest& request, const std::vector<std::string>& process_names);

}  // namespace cairn::engine
