// The front door's one converter between the public array types
// (include/cairn/engine.h) and the engine's requests: every public save and
// restore path (engine.h, checkpoint_manager.h, emergency.h) goes through
// it, so a field of the public types reaches the engine on every path.
//
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "cairn/engine.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save_request.h"

namespace cairn::api {

// Keys from the tree's root, each a dict key (as Orbax names nested dicts).
orbax::KeyPath KeyPathOf(const std::vector<std::string>& keys);

// Every field of every array and shard (immutable included).
// Errors: InvalidArgument for an unknown dtype name, naming the array.
Result<std::vector<engine::SaveLeaf>> SaveLeavesOf(const std::vector<CheckpointArray>& arrays);

// The engine's restore request. With `dtype_required`, an array without a
// dtype is InvalidArgument ("restoring `<param>`: the dtype is required");
// without, "" accepts the stored dtype. Errors: InvalidArgument for an
// unknown dtype name, naming the array.
Result<std::vector<engine::ArrayToRestore>> RestoreArraysOf(const std::vector<RestoreArray>& arrays,
                                                            bool dtype_required);

}  // namespace cairn::api
