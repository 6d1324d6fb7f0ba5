// The front door's opened item (include/cairn/orbax.h CheckpointItem) over
// the layout's orbax::OrbaxItem, for the restore path to read from.
//
// Thread safety: pure functions.
#pragma once

#include <memory>

#include "cairn/layout/orbax/item_store.h"
#include "cairn/orbax.h"

namespace cairn::api {

// The layout's item `item` was opened from (OpenCheckpointItem); null for
// null.
std::shared_ptr<const orbax::OrbaxItem> OrbaxItemOf(const std::shared_ptr<const CheckpointItem>& item);

}  // namespace cairn::api
