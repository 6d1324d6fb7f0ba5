// Merging per-process OCDBT databases under one root, as the
// primary process of a multi-host Orbax save does at the end.
//
// Each process `i` wrote its own database in `<item>/ocdbt.process_<i>/`.
// MergeOcdbtDatabases writes ONE new generation of the root database in
// `<item>/` whose leaf entries are the children's entries, unchanged keys:
// inline values stay inline (copied into the root's leaves), out-of-line
// values are NOT copied: the root's leaves refer to the children's data files
// with base path `ocdbt.process_<i>/`. New B+tree nodes go to the root's own
// `d/`. This is the structure TensorStore's `experimental_copy_range_to`
// produces for the same children.
//
// The root commit follows OcdbtKvStore's durability protocol; the children
// are only read. Children must stay where they are (the root refers into
// them) and must not change afterwards.
//
// Thread safety: stateless functions; as thread-safe as the base store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

namespace cairn::ocdbt {

// Merges the latest generation of each child database into the root
// database stored in `root_base` (created with `root_options` when absent;
// an existing root keeps its config and its other keys, merged keys
// replace its entries of the same key). `child_dirs` are directories under
// `root_base` ("ocdbt.process_0" or "ocdbt.process_0/"); a child without a
// manifest contributes nothing.
// Errors: InvalidArgument for an empty list, a directory that is not a
// relative path without "." or ".." components, or a repeated directory;
// FailedPrecondition naming the key and both children when two children
// hold the same key; DataLoss for corrupt children; errors of the commit.
Status MergeOcdbtDatabases(std::shared_ptr<KvStore> root_base,
                           const std::vector<std::string>& child_dirs,
                           const OcdbtOptions& root_options = {});

// The per-process database directories under `root_base`, as Orbax names
// them: `ocdbt.process_<id>/` with `id` of [A-Za-z0-9]+ and a
// `manifest.ocdbt` inside, sorted. Errors: those of listing.
Result<std::vector<std::string>> FindProcessDatabases(KvStore& root_base);

}  // namespace cairn::ocdbt
