// An opened Orbax item as a CheckpointReader (layout/checkpoint_format.h):
// its array leaves (jax.Array, np.ndarray, scalar), named by their param
// name ('.'-joined keys, as Orbax names them in storage), with the tree
// keys from `_METADATA`'s key_metadata.
//
// Thread safety: ReadBox may be called concurrently.
#pragma once

#include <memory>

#include "cairn/layout/checkpoint_format.h"
#include "cairn/layout/orbax/item_store.h"

namespace cairn::orbax {

// Opens every array leaf of `item` (its metadata only). Errors name the
// param and the item.
Result<std::unique_ptr<layout::CheckpointReader>> NewOrbaxReader(OrbaxItem item);

}  // namespace cairn::orbax
