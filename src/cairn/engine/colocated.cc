// Implements step 3 of the colocated protocol in colocated.h.
#include "cairn/engine/colocated.h"

#include "cairn/engine/orbax_item.h"

namespace cairn::engine {

Status FinalizeColocatedSave(const SaveRequest& request, const std::vector<std::string>& process_names) {
  const std::string where = "finalizing the colocated save of " + FinalTopOf(request);
  if (!request.caller_commits) return InvalidArgumentError(where + ": the caller must commit the item");
  CAIRN_ASSIGN_OR_RETURN(ItemPaths paths, PathsFor(request, ""));
  return FinalizeAndCommit(request, paths, 0, Now(), process_names).Annotate(where);
}

}  // namespace cairn::engine
