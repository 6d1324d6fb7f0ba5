// PointReportingKvStore: the store a CheckpointManager writes through when a
// test asks for its named points (ManagerHooks::at_point). It forwards every
// call to its base store unchanged and reports, before forwarding:
//   - kPointDataWritten before an item's `_METADATA` is written (every
//     process has written its chunks and array metadata by then);
//   - kPointBeforeItemCommit / kPointBeforeStepCommit before the publication
//     (FinishPrefixCommit) of a prefix named `item_name` / any other prefix.
// A hook that kills the process there leaves storage exactly as a crash at
// that point of the save protocol would.
//
// Thread safety: as the base store; the hook may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/kvstore/kvstore.h"

namespace cairn::engine {

std::shared_ptr<KvStore> NewPointReportingKvStore(std::shared_ptr<KvStore> base, std::string item_name,
                                                  std::function<void(std::string_view)> at_point);

}  // namespace cairn::engine
