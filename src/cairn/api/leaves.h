// The front door's one converter between the public array types
// (include/cairn/engine.h) and the engine's requests: every public save and
// restore path (engine.h, checkpoint_manager.h, emergency.h) goes through
// it, so a field of the public types reaches the engine on every path.
//
// Thread safety: pure functions.
#pragma once

#include <memory>
#include <vector>

#include "cairn/engine.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save_request.h"
#include "cairn/kvstore/mapped_read.h"

namespace cairn::api {

// Keys from the tree's root, each a dict key (as Orbax names nested dicts)
// unless `kinds` (one per key) says otherwise. Errors: InvalidArgument for
// a kind other than the two or a count other than the keys'.
Result<orbax::KeyPath> KeyPathOf(const std::vector<std::string>& keys,
                                 const std::vector<PathKeyKind>& kinds = {});

// Every field of every array and shard (immutable included), the write
// layout derived where the array asks for it (layout_from).
// Errors: InvalidArgument for an unknown dtype name, a missing one, a
// shard's item size other than the dtype's or a layout that does not fit,
// naming the array.
Result<std::vector<engine::SaveLeaf>> SaveLeavesOf(const std::vector<CheckpointArray>& arrays);

// The engine's restore request. With `dtype_required`, an array without a
// dtype is InvalidArgument ("restoring `<param>`: the dtype is required");
// without, "" accepts the stored dtype. With `mapped` set, every box may be
// mapped instead of filled (engine/restore.h BoxToRestore::mapped):
// (*mapped)[array][box] then receives the mapping. Errors: InvalidArgument
// for an unknown dtype name, naming the array.
Result<std::vector<engine::ArrayToRestore>> RestoreArraysOf(
    const std::vector<RestoreArray>& arrays, bool dtype_required,
    std::vector<std::vector<std::shared_ptr<MappedBytes>>>* mapped = nullptr);

}  // namespace cairn::api
